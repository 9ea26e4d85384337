package pipeline_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkClaimTracing is the per-claim cost of tracing: the claim path of
// BenchmarkClaim with the zero-latency in-process sandboxd and fsync off
// (so the pipeline's own work is all there is), under three tracer
// providers in one run:
//
//   - tracing=off: the no-op provider (the OTel default when nothing is
//     installed);
//   - tracing=unsampled: an SDK provider that samples nothing, which is
//     what vk-sandbox installs when no OTLP endpoint is configured (spans
//     get ids for log correlation but record nothing);
//   - tracing=on: an SDK provider sampling every span into a batch span
//     processor whose exporter discards, i.e. the full recording and
//     batching cost without network.
//
// Compare ns/op and cpu-µs/claim of the three lines; the ratio on/off is
// the tracing overhead per claim transaction (5 spans per claim here: the
// transaction, queue.wait, claim.reconcile, store.commit, status.push).
func BenchmarkClaimTracing(b *testing.B) {
	for _, conc := range []int{1, 64} {
		for _, mode := range []string{"off", "unsampled", "on"} {
			b.Run(fmt.Sprintf("conc=%d/tracing=%s", conc, mode), func(b *testing.B) {
				installTracing(b, mode)
				benchClaim(b, conc, false, true)
			})
		}
	}
}

// installTracing sets the global tracer provider for one sub-benchmark and
// restores the no-op one afterwards. Its cleanup is registered before the
// engine's, so it runs after the engine has stopped (cleanups are LIFO) and
// the batch processor's goroutine is gone before goleak looks.
func installTracing(b *testing.B, mode string) {
	var tp trace.TracerProvider = noop.NewTracerProvider()
	var sdk *sdktrace.TracerProvider
	switch mode {
	case "off":
	case "unsampled":
		sdk = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	case "on":
		sdk = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(discardExporter{}))
	default:
		b.Fatalf("unknown tracing mode %q", mode)
	}
	if sdk != nil {
		tp = sdk
	}
	otel.SetTracerProvider(tp)
	b.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		if sdk != nil {
			if err := sdk.Shutdown(context.Background()); err != nil {
				b.Errorf("tracer provider shutdown: %v", err)
			}
		}
	})
}

// discardExporter accepts every batch and drops it.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }
