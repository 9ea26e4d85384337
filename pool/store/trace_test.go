package store

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A commit made under a recording span tells that span what the group
// commit cost: how many callers shared it, the bytes, and the fsync.
func TestCommitAnnotatesTheCallersSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	s := mustOpen(t, statePath(t), Options{})
	defer s.Close()

	ctx, span := tp.Tracer("test").Start(context.Background(), "store.commit")
	if err := s.Put(ctx, "ns/a", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	span.End()
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range exp.GetSpans()[0].Attributes {
		got[kv.Key] = kv.Value
	}
	if v := got["vksandbox.store.batch_size"]; v.AsInt64() != 1 {
		t.Errorf("batch_size = %v, want 1", v.String())
	}
	if v := got["vksandbox.store.bytes"]; v.AsInt64() < 100 {
		t.Errorf("bytes = %v, want the record's size", v.String())
	}
	if v, ok := got["vksandbox.store.fsync_ms"]; !ok || v.AsFloat64() <= 0 {
		t.Errorf("fsync_ms = %v (present %v), want a positive duration with fsync on", v.String(), ok)
	}
	for k, v := range got {
		if v.String() == testClaim(1).Token {
			t.Errorf("attribute %s carries the token", k)
		}
	}
}
