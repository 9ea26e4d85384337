package telemetry

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// isolateEnv blanks every OTEL_* variable Setup reads, so a developer's
// shell (or CI) exporting to a collector cannot change test outcomes.
func isolateEnv(t testing.TB) {
	t.Helper()
	for _, k := range []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_METRICS_EXEMPLAR_FILTER",
	} {
		t.Setenv(k, "")
	}
}

// setup runs Setup with a clean environment and shuts down at test end.
func setup(t testing.TB, c Config) *Telemetry {
	t.Helper()
	tel, err := Setup(context.Background(), c)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel
}

// setupInMemory is Setup with a synchronous in-memory span exporter.
func setupInMemory(t testing.TB) (*Telemetry, *tracetest.InMemoryExporter) {
	t.Helper()
	isolateEnv(t)
	exp := tracetest.NewInMemoryExporter()
	return setup(t, Config{SpanExporter: exp, NodeName: "node-a", Version: "v1.2.3"}), exp
}

// get performs a GET against h and returns status and body.
func get(t *testing.T, h http.Handler, path, accept string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	code, b := testkit.Get(t, srv.URL+path, accept)
	return code, string(b)
}

// sample returns the value of series (a name and its whole label set, as
// exposed: `name{k="v"}`, histograms as name_bucket, name_sum, name_count)
// in a text-format scrape, and whether it was present. Both are read with
// Prometheus's own parser.
func sample(body, series string) (float64, bool) {
	var key string
	for k := range flatten(series + " 0\n") {
		key = k
	}
	v, ok := flatten(body)[key]
	return v, ok
}

// flatten maps every sample of a text-format scrape to its value, keyed by
// its series name and sorted label set.
func flatten(text string) map[string]float64 {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	out := map[string]float64{}
	if err != nil {
		return out
	}
	key := func(name string, m *dto.Metric, extra ...string) string {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
		}
		for i := 0; i+1 < len(extra); i += 2 {
			ls = append(ls, extra[i]+"="+strconv.Quote(extra[i+1]))
		}
		sort.Strings(ls)
		return name + "{" + strings.Join(ls, ",") + "}"
	}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			switch {
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					if math.IsInf(b.GetUpperBound(), 1) {
						le = "+Inf"
					}
					out[key(name+"_bucket", m, "le", le)] = float64(b.GetCumulativeCount())
				}
				out[key(name+"_bucket", m, "le", "+Inf")] = float64(h.GetSampleCount())
				out[key(name+"_sum", m)] = h.GetSampleSum()
				out[key(name+"_count", m)] = float64(h.GetSampleCount())
			case m.GetCounter() != nil:
				out[key(name, m)] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key(name, m)] = m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				out[key(name, m)] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

func grepLines(body, sub string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func benchClaimSpans(b *testing.B, tr trace.Tracer, reset func()) {
	ctx := context.Background()
	children := [...]string{"queue_wait", "sandboxd.claim", "store.commit"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rctx, root := tr.Start(ctx, "claim")
		root.SetAttributes(claimAttrs(i)...)
		for _, name := range children {
			_, c := tr.Start(rctx, name)
			c.SetAttributes(claimAttrs(i)...)
			c.End()
		}
		root.End()
		if i++; reset != nil && i%1024 == 0 {
			reset()
		}
	}
}

// claimAttrs builds the attributes per call, as real code does, from
// values that already exist (no string formatting is being measured).
func claimAttrs(i int) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("k8s.namespace.name", "team-a"),
		attribute.String("k8s.pod.name", "sandbox-7f3c"),
		attribute.String("k8s.pod.uid", "0b6c2f4e-1d2a-4c9b-8f1e-2a3b4c5d6e7f"),
		attribute.Int("vksandbox.shard", i&7),
		attribute.Bool("vksandbox.adopted", false),
	}
}

type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }

func (discardExporter) Shutdown(context.Context) error { return nil }

func assertResource(t *testing.T, res *resource.Resource, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, kv := range res.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("resource %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

// logHas fails t unless out contains every one of want and none of absent.
func logHas(t *testing.T, out string, want []string, absent ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("log lacks %s: %s", w, out)
		}
	}
	for _, a := range absent {
		if strings.Contains(out, a) {
			t.Errorf("log has %q, which should not have passed: %s", a, out)
		}
	}
}
