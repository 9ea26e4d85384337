package pool_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// recordSpans installs a recording global tracer provider (clients built
// afterwards take it) and returns a context under a fresh parent span, and
// a function listing the ended spans of that trace.
func recordSpans(t *testing.T) (context.Context, trace.Span, func() []sdktrace.ReadOnlySpan) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	c, parent := tp.Tracer("test").Start(ctx(t), "caller")
	return c, parent, func() []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() == parent.SpanContext().TraceID() && s.Name() != "caller" {
				out = append(out, s)
			}
		}
		return out
	}
}

func attrOf(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// The telemetry contract (docs/observability.md): every attempt is one
// client span named after its verb, a child of the caller's span, with the
// request's method, URL and server and the answer's status, ended by the
// time the call returns; its traceparent is what sandboxd saw.
func TestEveryAttemptIsOneClientSpanNamedAfterItsVerb(t *testing.T) {
	c, parent, spans := recordSpans(t)
	h := newHarness(t, sim.Config{})
	resp, err := h.node.Claim(c, pool.ClaimRequest{Template: "default", ClaimRef: "ns/spanned"})
	if h.err(err) != nil {
		t.Fatal(err)
	}
	h.secret(resp.Token)
	if err := h.err(h.node.Release(c, resp.ID, resp.Token)); err != nil {
		t.Fatal(err)
	}

	got := spans()
	if len(got) != 2 || got[0].Name() != "sandboxd.claim" || got[1].Name() != "sandboxd.release" {
		names := []string{}
		for _, s := range got {
			names = append(names, s.Name())
		}
		t.Fatalf("spans %v, want [sandboxd.claim sandboxd.release]", names)
	}
	claim := got[0]
	if claim.SpanKind() != trace.SpanKindClient || claim.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("claim span: kind %v parent %v, want a client span under the caller's %v", claim.SpanKind(), claim.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	for key, want := range map[string]string{
		"http.request.method": "POST", "url.full": h.url + "/v1/claim", "server.address": "127.0.0.1",
	} {
		if v, ok := attrOf(claim, key); !ok || v.AsString() != want {
			t.Errorf("claim span %s = %q, want %q", key, v.AsString(), want)
		}
	}
	if v, ok := attrOf(claim, "server.port"); !ok || v.AsInt64() <= 0 {
		t.Errorf("claim span server.port = %v", v.AsInt64())
	}
	if v, _ := attrOf(claim, "http.response.status_code"); v.AsInt64() != http.StatusOK {
		t.Errorf("claim span status code %d, want 200", v.AsInt64())
	}
	if claim.Status().Code != codes.Unset {
		t.Errorf("claim span status %v, want unset", claim.Status())
	}
	if ids := h.sim.TraceIDs(); !slices.Contains(ids, claim.SpanContext().TraceID().String()) {
		t.Errorf("sandboxd saw trace ids %v, want the claim span's %s", ids, claim.SpanContext().TraceID())
	}
}

// By the semantic conventions of a client span, an answer of 400 or more
// is an Error span; here a draining node's 429.
func TestAnAnswerOf400OrMoreMakesAnErrorSpan(t *testing.T) {
	c, _, spans := recordSpans(t)
	h := newHarness(t, sim.Config{Draining: true})
	if _, err := h.node.Claim(c, pool.ClaimRequest{Template: "default"}); h.err(err) == nil {
		t.Fatal("a draining node's claim succeeded")
	}
	got := spans()
	if len(got) != 1 {
		t.Fatalf("%d spans, want 1", len(got))
	}
	if v, _ := attrOf(got[0], "http.response.status_code"); v.AsInt64() != http.StatusTooManyRequests || got[0].Status().Code != codes.Error {
		t.Errorf("429 span: status code %d, status %v; want 429 and Error", v.AsInt64(), got[0].Status())
	}
}

// An attempt with no answer is an Error span naming the error's type, and
// its description is the scrubbed error text: no token.
func TestAnUnansweredAttemptIsAnErrorSpanWithoutTheToken(t *testing.T) {
	c, _, spans := recordSpans(t)
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // nothing listens there now
	cl, err := pool.NewClient(pool.ClientOptions{BaseURL: url + "/" + nodeToken, Token: nodeToken})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Claim(c, pool.ClaimRequest{Template: "default"}); err == nil {
		t.Fatal("a claim to a closed port succeeded")
	}
	got := spans()
	if len(got) != 1 {
		t.Fatalf("%d spans, want 1", len(got))
	}
	st := got[0].Status()
	if st.Code != codes.Error || st.Description == "" || strings.Contains(st.Description, nodeToken) {
		t.Errorf("span status %+v: want Error with the scrubbed error text", st)
	}
	if _, ok := attrOf(got[0], "error.type"); !ok {
		t.Error("span has no error.type")
	}
}

// A caller's own Transport is used as is, and the attempt is still traced:
// sandboxd sees the caller's trace.
func TestACallersTransportStillCarriesTraceparent(t *testing.T) {
	c, parent, spans := recordSpans(t)
	h := newHarness(t, sim.Config{})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cl := h.client(nodeToken, func(o *pool.ClientOptions) { o.Transport = tr })
	resp, err := cl.Claim(c, pool.ClaimRequest{Template: "default"})
	if h.err(err) != nil {
		t.Fatal(err)
	}
	h.secret(resp.Token)
	if ids := h.sim.TraceIDs(); !slices.Contains(ids, parent.SpanContext().TraceID().String()) {
		t.Errorf("sandboxd saw trace ids %v, want the caller's %s", ids, parent.SpanContext().TraceID())
	}
	if got := spans(); len(got) != 1 || got[0].Name() != "sandboxd.claim" {
		t.Errorf("%d spans, want one sandboxd.claim", len(got))
	}
}
