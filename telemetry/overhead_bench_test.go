package telemetry

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkSpanOverhead measures the tracing cost of one claim transaction:
// a root span and three children (queue wait, sandboxd, commit), five
// attributes each.
//
//   - no-exporter: Setup with no OTLP endpoint, the production default.
//   - inmemory-exporter: Setup with a synchronous in-memory exporter; every
//     span is recorded and snapshotted on End ("tracing on", worst case).
//   - noop-provider: the OTel no-op API, the floor.
//   - recording-no-processor: an SDK provider with the default sampler and
//     no processor, the setup Setup rejected for "off" (see Setup).
//   - batcher-discard: the real "on" shape, a batch processor feeding an
//     exporter that drops everything; hot-path cost only (serialisation
//     and network happen on the batch goroutine and are not counted).
func BenchmarkSpanOverhead(b *testing.B) {
	b.Run("no-exporter", func(b *testing.B) {
		isolateEnv(b)
		benchClaimSpans(b, setup(b, Config{}).Tracer(), nil)
	})
	b.Run("inmemory-exporter", func(b *testing.B) {
		isolateEnv(b)
		exp := tracetest.NewInMemoryExporter()
		// Reset keeps memory flat over b.N; its cost is amortised to ~0.
		benchClaimSpans(b, setup(b, Config{SpanExporter: exp}).Tracer(), exp.Reset)
	})
	b.Run("noop-provider", func(b *testing.B) {
		benchClaimSpans(b, noop.NewTracerProvider().Tracer(TracerName), nil)
	})
	b.Run("recording-no-processor", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider()
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		benchClaimSpans(b, tp.Tracer(TracerName), nil)
	})
	b.Run("batcher-discard", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		benchClaimSpans(b, tp.Tracer(TracerName), nil)
	})
}

// BenchmarkClaimMetrics is the metrics cost of one claim: its latency, one
// sandboxd call and one decision. "sampled" adds exemplar capture.
func BenchmarkClaimMetrics(b *testing.B) {
	run := func(b *testing.B, tel *Telemetry) {
		ctx, span := tel.Tracer().Start(context.Background(), "claim")
		defer span.End()
		m := tel.Metrics
		b.ReportAllocs()
		for b.Loop() {
			m.ClaimLatency(ctx, "running", 700*time.Microsecond)
			m.SandboxdRequest(ctx, "claim", 200, 500*time.Microsecond)
			m.Decision(ctx, "adopt", "restart")
		}
	}
	b.Run("unsampled", func(b *testing.B) {
		isolateEnv(b)
		run(b, setup(b, Config{}))
	})
	b.Run("sampled", func(b *testing.B) {
		isolateEnv(b)
		run(b, setup(b, Config{SpanExporter: tracetest.NewInMemoryExporter()}))
	})
}
