package pool_test

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// the telemetry contract (docs/observability.md): the sandboxd call carries W3C traceparent, and the trace id
// appears in the emulator's request log line.
func TestClaimSendsTraceparentAndTheSimLogsTheTraceID(t *testing.T) {
	var logs testkit.Buffer
	h := newHarness(t, sim.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	tid := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled})
	spanCtx := trace.ContextWithSpanContext(ctx(t), sc)

	resp, err := h.node.Claim(spanCtx, pool.ClaimRequest{Template: "default", ClaimRef: "ns/traced"})
	if h.err(err) != nil {
		t.Fatal(err)
	}
	h.secret(resp.Token)
	if got := h.sim.TraceIDs(); !slices.Contains(got, tid.String()) {
		t.Errorf("sim saw trace ids %v, want %s", got, tid)
	}
	if !strings.Contains(logs.String(), `"trace_id":"`+tid.String()+`"`) {
		t.Errorf("request log lacks the trace id:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), resp.Token) || strings.Contains(logs.String(), nodeToken) {
		t.Error("the request log contains a token")
	}
}
