package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
)

// observability is what `make demo-observability` adds to the demo: a real
// Jaeger receiving the traces of vk-sandbox and of the emulator, and a real
// Prometheus scraping vk-sandbox when one is installed.
type observability struct {
	jaeger *kubetest.Jaeger
	prom   *kubetest.Prometheus // nil without a prometheus binary
	// simTP exports the in-process emulator's server spans to Jaeger.
	simTP *sdktrace.TracerProvider
}

// startJaeger starts Jaeger (built once into the tools cache) and the
// emulator's span export. A nil *observability is the plain demo.
func startJaeger(ctx context.Context, dir string) (*observability, error) {
	step("starting Jaeger v2 (the first run builds it from the Go module proxy: ~11 minutes)")
	j, err := kubetest.StartJaeger(ctx, kubetest.JaegerOptions{
		Dir: filepath.Join(dir, "jaeger"), Logf: func(f string, a ...any) { fmt.Printf("    "+f+"\n", a...) },
	})
	if err != nil {
		return nil, err
	}
	tp, err := j.TracerProvider(ctx, "sandboxd-sim")
	if err != nil {
		_ = j.Stop()
		return nil, err
	}
	fmt.Printf("    OTLP/HTTP at %s, query API and UI at %s\n", j.OTLPEndpoint, j.QueryURL)
	return &observability{jaeger: j, simTP: tp}, nil
}

// env is what vk-sandbox gets to export to Jaeger: every claim, in
// batches of half a second so the traces show up while the demo runs.
func (o *observability) env() []string {
	if o == nil {
		return nil
	}
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + o.jaeger.OTLPEndpoint, "OTEL_BSP_SCHEDULE_DELAY=500"}
}

// startPrometheus scrapes vk-sandbox's /metrics, or says why not.
func (o *observability) startPrometheus(ctx context.Context, dir, metricsAddr string) error {
	if o == nil {
		return nil
	}
	p, err := kubetest.StartPrometheus(ctx, kubetest.PrometheusOptions{Dir: filepath.Join(dir, "prometheus"), Targets: []string{metricsAddr}})
	switch {
	case errors.Is(err, kubetest.ErrNoPrometheus):
		fmt.Printf("    Prometheus: not started, %v; the metrics are still at http://%s/metrics\n", err, metricsAddr)
		return nil
	case err != nil:
		return err
	}
	o.prom = p
	fmt.Printf("    Prometheus at %s, scraping http://%s/metrics every second, exemplars on\n", p.URL, metricsAddr)
	return nil
}

// report prints where to look: the trace of the first claim (found in
// Jaeger by its Pod UID), the trace search, and the Prometheus views.
func (o *observability) report(ctx context.Context, podUID string) error {
	if o == nil {
		return nil
	}
	var ids []string
	if err := waitFor(ctx, "the first claim's trace in Jaeger", func(ctx context.Context) bool {
		got, err := o.jaeger.TraceIDs(ctx, "vk-sandbox", "claim.transaction", map[string]string{"k8s.pod.uid": podUID}, 5)
		ids = got
		return err == nil && len(got) > 0
	}); err != nil {
		return err
	}
	q := o.jaeger.QueryURL
	search := q + "/api/traces?" + url.Values{"service": {"vk-sandbox"}, "operation": {"claim.transaction"}, "lookback": {"1h"}}.Encode()
	fmt.Printf("\nTraces (Jaeger):\n")
	fmt.Printf("  the first claim's trace, OTLP JSON:  %s/api/v3/traces/%s\n", q, ids[0])
	fmt.Printf("  every claim.transaction:             %s\n", search)
	fmt.Printf("  the trace in the Jaeger UI:          %s\n", o.jaeger.TraceURL(ids[0]))
	fmt.Printf("    (a Jaeger built from the Go module proxy has no UI assets and shows a placeholder page there;\n")
	fmt.Printf("     see docs/observability.md)\n")
	if o.prom != nil {
		expr := "histogram_quantile(0.99, sum by (le, outcome) (rate(vksandbox_claim_duration_seconds_bucket[1m])))"
		fmt.Printf("Metrics (Prometheus):\n")
		fmt.Printf("  claim latency p99:  %s/graph?%s\n", o.prom.URL, url.Values{"g0.expr": {expr}, "g0.tab": {"0"}}.Encode())
		fmt.Printf("  exemplars:          %s/api/v1/query_exemplars?%s\n", o.prom.URL,
			url.Values{"query": {"vksandbox_claim_duration_seconds_bucket"}}.Encode())
	}
	fmt.Printf("  (each exemplar's trace_id names a trace: %s/api/v3/traces/<trace_id>)\n", q)
	return nil
}

// stop flushes the emulator's spans and stops Prometheus and Jaeger.
func (o *observability) stop() {
	if o == nil {
		return
	}
	_ = o.simTP.Shutdown(context.Background())
	_ = o.prom.Stop()
	_ = o.jaeger.Stop()
}
