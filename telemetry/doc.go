// Package telemetry owns the process's observability plumbing: the OTel
// tracer and meter providers, the Prometheus /metrics, /healthz and /readyz
// handler, and logging helpers that put trace ids into log lines.
//
// It is a leaf: it imports nothing else from this repository, so every
// package (pool, pipeline, kube, cmd) may depend on it.
//
// Lifecycle:
//
//	tel, err := telemetry.Setup(ctx, telemetry.Config{Version: v, NodeName: node})
//	if err != nil { ... }
//	defer tel.Shutdown(context.Background()) // flushes buffered spans
//	go http.ListenAndServe(addr, tel.Handler(ready))
//	ctx, span := tel.Tracer().Start(ctx, "claim")
//	defer span.End()
//	tel.Metrics.ClaimLatency(ctx, pipeline.OutcomeRunning, d)
//
// Trace export is configured only by the standard OTEL_* environment
// variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// OTEL_EXPORTER_OTLP_HEADERS, OTEL_TRACES_SAMPLER, OTEL_RESOURCE_ATTRIBUTES,
// ...). With no endpoint set nothing is exported, but spans still carry
// trace ids so log lines of one claim can be correlated.
//
// Callers never name an instrument: every metric of the product is a method
// on [Metrics], in the manner of client-go's workqueue metrics provider.
package telemetry
