package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vktrace "github.com/virtual-kubelet/virtual-kubelet/trace"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
)

func TestSetupWithoutEndpointExportsNothingButSpansHaveIDs(t *testing.T) {
	isolateEnv(t)
	tel := setup(t, Config{})
	if tel.ExportingTraces {
		t.Fatal("ExportingTraces = true with no endpoint and no override")
	}
	_, span := tel.Tracer().Start(context.Background(), "claim")
	defer span.End()
	sc := span.SpanContext()
	if !sc.TraceID().IsValid() || !sc.SpanID().IsValid() {
		t.Fatalf("span context %v has no valid ids; logs could not be correlated", sc)
	}
	if span.IsRecording() || sc.IsSampled() {
		t.Fatal("span is recorded although nothing would export it")
	}
}

func TestSetupHonoursTracesExporterNone(t *testing.T) {
	isolateEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	if tel := setup(t, Config{}); tel.ExportingTraces {
		t.Fatal("OTEL_TRACES_EXPORTER=none still exports")
	}
}

func TestSetupRejectsGRPCProtocol(t *testing.T) {
	isolateEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if tel, err := Setup(context.Background(), Config{}); err == nil {
		_ = tel.Shutdown(context.Background())
		t.Fatal("Setup accepted OTLP over gRPC, which is not linked in")
	}
}

func TestSpanExporterOverrideExportsSpansSynchronously(t *testing.T) {
	tel, exp := setupInMemory(t)
	if !tel.ExportingTraces {
		t.Fatal("ExportingTraces = false with a SpanExporter override")
	}
	ctx, root := tel.Tracer().Start(context.Background(), "claim")
	_, child := tel.Tracer().Start(ctx, "sandboxd")
	child.End()
	root.End()
	spans := exp.GetSpans() // no flush: WithSyncer exports on End
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	if spans[0].Name != "sandboxd" || spans[0].Parent.SpanID() != root.SpanContext().SpanID() {
		t.Fatalf("child span %q has parent %v, want sandboxd under claim", spans[0].Name, spans[0].Parent)
	}
	if got := spans[1].InstrumentationScope.Name; got != TracerName {
		t.Fatalf("scope = %q, want %q", got, TracerName)
	}
}

func TestSetupHonoursTracesSamplerEnv(t *testing.T) {
	tel, exp := setupInMemory(t)
	_ = tel.Shutdown(context.Background())
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	tel = setup(t, Config{SpanExporter: exp})
	_, span := tel.Tracer().Start(context.Background(), "claim")
	span.End()
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("OTEL_TRACES_SAMPLER=always_off ignored: %d spans exported", n)
	}
}

func TestResourceNamesNodeAndLetsEnvWin(t *testing.T) {
	isolateEnv(t)
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=lab")
	res, err := newResource(context.Background(), Config{ServiceName: "from-config", Version: "v9", NodeName: "vk-node-1"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"service.name": "from-env", "service.version": "v9", "host.name": "vk-node-1",
		"k8s.node.name": "vk-node-1", "deployment.environment.name": "lab", "telemetry.sdk.language": "go",
	}
	assertResource(t, res, want)

	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	res, err = newResource(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	assertResource(t, res, map[string]string{"service.name": "vk-sandbox"})
}

// The batch processor holds spans for up to 5s; Shutdown must push them out
// before returning or a node drain loses the traces of its last claims.
func TestShutdownFlushesOTLPBatch(t *testing.T) {
	isolateEnv(t)
	var posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" {
			if b, _ := io.ReadAll(r.Body); len(b) > 0 {
				posts.Add(1)
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)

	tel, err := Setup(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !tel.ExportingTraces {
		t.Fatal("endpoint set but ExportingTraces = false")
	}
	_, span := tel.Tracer().Start(context.Background(), "claim")
	span.End()
	if posts.Load() != 0 {
		t.Fatal("span exported before the batch timeout; the test proves nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if posts.Load() == 0 {
		t.Fatal("Shutdown returned without posting the buffered span")
	}
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}

func TestVirtualKubeletSpansJoinOurTrace(t *testing.T) {
	tel, exp := setupInMemory(t)
	ctx, root := tel.Tracer().Start(context.Background(), "claim")
	_, vkSpan := vktrace.StartSpan(ctx, "createOrUpdatePod")
	vkSpan.End()
	root.End()
	for _, s := range exp.GetSpans() {
		if s.Name == "createOrUpdatePod" {
			if s.SpanContext.TraceID() != root.SpanContext().TraceID() || s.Parent.SpanID() != root.SpanContext().SpanID() {
				t.Fatalf("vk span not a child of ours: parent %v", s.Parent)
			}
			return
		}
	}
	t.Fatalf("virtual-kubelet span not exported: %v", exp.GetSpans())
}

func TestSetupInstallsW3CPropagator(t *testing.T) {
	tel, _ := setupInMemory(t)
	if otel.GetTracerProvider() != tel.TracerProvider {
		t.Fatal("global TracerProvider not ours")
	}
	m, _ := baggage.NewMember("tenant", "t1")
	b, _ := baggage.New(m)
	ctx, span := tel.Tracer().Start(baggage.ContextWithBaggage(context.Background(), b), "claim")
	defer span.End()
	h := http.Header{}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
	if want := "00-" + span.SpanContext().TraceID().String(); !strings.HasPrefix(h.Get("traceparent"), want) {
		t.Fatalf("traceparent = %q, want prefix %q", h.Get("traceparent"), want)
	}
	if h.Get("baggage") != "tenant=t1" {
		t.Fatalf("baggage = %q, want tenant=t1", h.Get("baggage"))
	}
}
