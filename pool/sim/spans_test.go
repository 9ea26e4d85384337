package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// With a TracerProvider, every request is a server span, a child of the
// caller's traceparent, named after its route, with the status, the
// injected fault and the claim's notes; a 5xx is an error. No attribute
// holds a token.
func TestServerSpanPerRequestJoinsTheCallersTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	n := newNode(t, sim.Config{TracerProvider: tp})
	n.sim.InjectFault(sim.Fault{Verb: pool.VerbClaim, Mode: "500", Count: 1})

	// The caller's span lives in another provider, as vk-sandbox's does.
	caller := sdktrace.NewTracerProvider()
	ctx, parent := caller.Tracer("caller").Start(context.Background(), "sandboxd.claim")
	defer parent.End()
	claim := func() int {
		body, _ := json.Marshal(pool.ClaimRequest{Template: "default", ClaimRef: "ns/traced"})
		req, err := http.NewRequestWithContext(ctx, "POST", n.ts.URL+"/v1/claim", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+rootToken)
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
		resp, err := n.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := claim(); got != 500 {
		t.Fatalf("faulted claim: %d", got)
	}
	if got := claim(); got != 200 {
		t.Fatalf("second claim: %d", got)
	}

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2: %+v", len(spans), spans)
	}
	psc := parent.SpanContext()
	for i, want := range []struct {
		status int
		fault  string
		code   codes.Code
	}{{500, "500", codes.Error}, {200, "", codes.Unset}} {
		s := spans[i]
		attrs := attribute.NewSet(s.Attributes...)
		str := func(k string) string { v, _ := attrs.Value(attribute.Key(k)); return v.String() }
		switch {
		case s.Name != "POST /v1/claim" || s.SpanKind != trace.SpanKindServer:
			t.Errorf("span %d: %q kind %v, want a server span POST /v1/claim", i, s.Name, s.SpanKind)
		case s.SpanContext.TraceID() != psc.TraceID() || s.Parent.SpanID() != psc.SpanID() || !s.Parent.IsRemote():
			t.Errorf("span %d is not a child of the caller's remote span", i)
		case str("http.response.status_code") != strconv.Itoa(want.status) || str("sandboxd.verb") != "claim" || str("http.route") != "/v1/claim":
			t.Errorf("span %d attributes: %v", i, s.Attributes)
		case str("sandboxd_sim.fault") != want.fault:
			t.Errorf("span %d fault %q, want %q", i, str("sandboxd_sim.fault"), want.fault)
		case s.Status.Code != want.code:
			t.Errorf("span %d status %v, want %v", i, s.Status.Code, want.code)
		}
		for _, kv := range s.Attributes {
			if bytes.Contains([]byte(kv.Value.String()), []byte(rootToken)) {
				t.Errorf("span %d attribute %s holds the token", i, kv.Key)
			}
		}
	}
	last := attribute.NewSet(spans[1].Attributes...)
	if v, _ := last.Value("sandboxd.claim_ref"); v.AsString() != "ns/traced" {
		t.Errorf("the claim's span lacks its claim_ref: %v", spans[1].Attributes)
	}
}
