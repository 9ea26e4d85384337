package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// Retry traces: errors are recorded on the span (docs/observability.md),
// and what is retried follows the sandboxd protocol (docs/architecture.md). The engine and the real sandboxd client trace through the OTel
// globals, so each test installs an SDK provider with a synchronous
// in-memory exporter before it builds the emulator's clients (a
// pool.Client takes its tracer when it is built) and the engine.

// traceRig is newRig with every span recorded.
type traceRig struct {
	*rig
	spans *tracetest.InMemoryExporter
}

func newTraceRig(t *testing.T) *traceRig {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		// Registered first, so it runs after the engine and clients stop.
		otel.SetTracerProvider(noop.NewTracerProvider())
		_ = tp.Shutdown(context.Background())
	})
	r := &traceRig{rig: newRig(t, sim.Config{}, nil), spans: exp}
	// Before the startup listing, every claim looks its key up first; the
	// trees below are those of a settled engine.
	select {
	case <-r.eng.Listed():
	case <-time.After(10 * time.Second):
		t.Fatal("startup listing did not succeed")
	}
	return r
}

// transaction waits for the ended claim.transaction span of uid whose
// outcome is outcome, and returns it with every span of its trace.
func (r *traceRig) transaction(t *testing.T, uid, outcome string) (tracetest.SpanStub, []tracetest.SpanStub) {
	t.Helper()
	var root tracetest.SpanStub
	testkit.WaitFor(t, waitTimeout, "claim.transaction of "+uid+" with outcome "+outcome, func() bool {
		for _, s := range r.spans.GetSpans() {
			if s.Name == "claim.transaction" && strAttr(s, "k8s.pod.uid") == uid && strAttr(s, "vksandbox.outcome") == outcome {
				root = s
				return true
			}
		}
		return false
	})
	var tree []tracetest.SpanStub
	for _, s := range r.spans.GetSpans() {
		if s.SpanContext.TraceID() == root.SpanContext.TraceID() {
			tree = append(tree, s)
		}
	}
	return root, tree
}

// childrenOf lists the spans in tree whose parent is p, in start order
// (the in-memory exporter keeps end order, and the client's spans end in order).
func childrenOf(tree []tracetest.SpanStub, p tracetest.SpanStub, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tree {
		if s.Parent.SpanID() == p.SpanContext.SpanID() && (name == "" || s.Name == name) {
			out = append(out, s)
		}
	}
	return out
}

func only(t *testing.T, tree []tracetest.SpanStub, p tracetest.SpanStub, name string) tracetest.SpanStub {
	t.Helper()
	got := childrenOf(tree, p, name)
	if len(got) != 1 {
		t.Fatalf("%s has %d %s children, want 1; tree:\n%s", p.Name, len(got), name, dump(tree))
	}
	return got[0]
}

func strAttr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func eventAttr(ev sdktrace.Event, key string) (attribute.Value, bool) {
	for _, kv := range ev.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func retryEvents(s tracetest.SpanStub) []sdktrace.Event {
	var out []sdktrace.Event
	for _, ev := range s.Events {
		if ev.Name == "claim.retry" {
			out = append(out, ev)
		}
	}
	return out
}

// httpStatuses is the http.response.status_code of each sandboxd.claim
// attempt, in the order the attempts started.
func httpStatuses(spans []tracetest.SpanStub) []string {
	sortByStart(spans)
	out := make([]string, 0, len(spans))
	for _, s := range spans {
		out = append(out, strAttr(s, "http.response.status_code"))
	}
	return out
}

func sortByStart(spans []tracetest.SpanStub) {
	for i := 1; i < len(spans); i++ {
		for j := i; j > 0 && spans[j].StartTime.Before(spans[j-1].StartTime); j-- {
			spans[j], spans[j-1] = spans[j-1], spans[j]
		}
	}
}

func dump(tree []tracetest.SpanStub) string {
	var b strings.Builder
	for _, s := range tree {
		b.WriteString("  " + s.Name + " parent=" + s.Parent.SpanID().String() + " id=" + s.SpanContext.SpanID().String() +
			" status=" + s.Status.Code.String() + " http=" + strAttr(s, "http.response.status_code") + "\n")
	}
	return b.String()
}

// A claim answered 500 once, then 200: one transaction, one trace. The
// claim.reconcile span holds both sandboxd.claim attempts (500 marked as an
// error, then 200), the claim_ref lookup between them (a 500 may follow a
// VM that was made, so the retry must not claim blindly), and one
// claim.retry event naming attempt 1 and the 500. The transaction ends
// Running with no error status.
func TestTraceShowsAClaimRetriedAfterA500(t *testing.T) {
	r := newTraceRig(t)
	r.env.sim.InjectFault(sim.Fault{Verb: "claim", Mode: "500", Count: 1})
	create(t, r.eng, intent("ns/retry-500", "uid-retry-500", ""))
	r.rep.running(t, "uid-retry-500")

	root, tree := r.transaction(t, "uid-retry-500", pipeline.OutcomeRunning)
	if root.Status.Code == codes.Error {
		t.Errorf("claim.transaction of ns/retry-500 has error status %q after a successful retry", root.Status.Description)
	}
	sf := only(t, tree, root, "claim.reconcile")
	attempts := childrenOf(tree, sf, "sandboxd.claim")
	if got := httpStatuses(attempts); len(got) != 2 || got[0] != "500" || got[1] != "200" {
		t.Fatalf("sandboxd.claim attempts of ns/retry-500 answered %v, want [500 200]; tree:\n%s", got, dump(tree))
	}
	if attempts[0].Status.Code != codes.Error {
		t.Errorf("the 500 attempt of ns/retry-500 has span status %v, want Error", attempts[0].Status.Code)
	}
	lookup := only(t, tree, sf, "sandboxd.list")
	if lookup.StartTime.Before(attempts[0].EndTime) || attempts[1].StartTime.Before(lookup.EndTime) {
		t.Errorf("the claim_ref lookup of ns/retry-500 did not run between the 500 and the retry; tree:\n%s", dump(tree))
	}
	evs := retryEvents(sf)
	if len(evs) != 1 {
		t.Fatalf("claim.reconcile of ns/retry-500 has %d claim.retry events, want 1: %+v", len(evs), sf.Events)
	}
	if n, ok := eventAttr(evs[0], "attempt"); !ok || n.AsInt64() != 1 {
		t.Errorf("claim.retry event of ns/retry-500: attempt = %v, want 1", n.String())
	}
	if e, _ := eventAttr(evs[0], "error"); !strings.Contains(e.AsString(), "500") {
		t.Errorf("claim.retry event of ns/retry-500 does not name the 500: %q", e.AsString())
	}
	for _, name := range []string{"store.commit", "status.push"} {
		only(t, tree, sf, name)
	}
	if got := r.env.count("claim"); got != 2 {
		t.Errorf("sandboxd served %d claim requests for ns/retry-500, want 2 (the 500 and the retry)", got)
	}
}

// A claim that keeps failing uses up the attempts of the retry policy
// (default 4): four sandboxd.claim spans, all 500, one claim.retry event per
// failed attempt, and the transaction span ends with error status and a
// description naming the Pod and the 500.
func TestTraceShowsEveryAttemptAndTheErrorWhenClaimRetriesRunOut(t *testing.T) {
	r := newTraceRig(t)
	r.env.sim.InjectFault(sim.Fault{Verb: "claim", Mode: "500", Count: 4})
	create(t, r.eng, intent("ns/retry-out", "uid-retry-out", ""))

	root, tree := r.transaction(t, "uid-retry-out", pipeline.OutcomeError)
	if root.Status.Code != codes.Error {
		t.Fatalf("claim.transaction of ns/retry-out has status %v after exhausted retries, want Error", root.Status.Code)
	}
	if d := root.Status.Description; !strings.Contains(d, "ns/retry-out") || !strings.Contains(d, "500") {
		t.Errorf("error status of ns/retry-out does not name the Pod and the 500: %q", d)
	}
	sf := only(t, tree, root, "claim.reconcile")
	if got := httpStatuses(childrenOf(tree, sf, "sandboxd.claim")); strings.Join(got, ",") != "500,500,500,500" {
		t.Fatalf("sandboxd.claim attempts of ns/retry-out answered %v, want four 500s; tree:\n%s", got, dump(tree))
	}
	evs := retryEvents(sf)
	if len(evs) != 4 {
		t.Fatalf("claim.reconcile of ns/retry-out has %d claim.retry events, want 4: %+v", len(evs), sf.Events)
	}
	for i, ev := range evs {
		if n, _ := eventAttr(ev, "attempt"); n.AsInt64() != int64(i+1) {
			t.Errorf("claim.retry event %d of ns/retry-out: attempt = %d, want %d", i, n.AsInt64(), i+1)
		}
	}
	push := only(t, tree, sf, "status.push")
	if got := strAttr(push, "vksandbox.pending.reason"); got != pipeline.ReasonClaimFailed {
		t.Errorf("status push of ns/retry-out: pending reason %q, want %s", got, pipeline.ReasonClaimFailed)
	}
	// The Pod is not given up: the slow requeue claims it in a new trace.
	r.rep.running(t, "uid-retry-out")
	next, _ := r.transaction(t, "uid-retry-out", pipeline.OutcomeRunning)
	if !linksTo(next, root) {
		t.Errorf("the requeued transaction of ns/retry-out does not link to the failed one")
	}
}

// A 429 is a capacity miss: never retried inside the transaction (the sandboxd protocol (docs/architecture.md)).
// The first trace has exactly one sandboxd.claim span (429), no claim.retry
// event, outcome capacity_miss without error status, and a Pending push with
// the capacity reason. The slow requeue then claims in a second trace,
// linked to the first, that ends Running.
func TestTraceShowsACapacityMissThenTheRequeuedClaim(t *testing.T) {
	r := newTraceRig(t)
	r.env.sim.InjectFault(sim.Fault{Verb: "claim", Mode: "429", Count: 1, RetryAfter: time.Second})
	create(t, r.eng, intent("ns/retry-429", "uid-retry-429", ""))

	miss, tree := r.transaction(t, "uid-retry-429", pipeline.OutcomeCapacity)
	if miss.Status.Code == codes.Error {
		t.Errorf("a capacity miss of ns/retry-429 is an error on the span: %q", miss.Status.Description)
	}
	sf := only(t, tree, miss, "claim.reconcile")
	if got := httpStatuses(childrenOf(tree, sf, "sandboxd.claim")); strings.Join(got, ",") != "429" {
		t.Fatalf("sandboxd.claim attempts of ns/retry-429 answered %v, want one 429; tree:\n%s", got, dump(tree))
	}
	if evs := retryEvents(sf); len(evs) != 0 {
		t.Errorf("a capacity miss of ns/retry-429 was retried inside the transaction: %+v", evs)
	}
	push := only(t, tree, sf, "status.push")
	if got := strAttr(push, "vksandbox.pending.reason"); got != pipeline.ReasonCapacity {
		t.Errorf("status push of ns/retry-429: pending reason %q, want %s", got, pipeline.ReasonCapacity)
	}

	r.rep.running(t, "uid-retry-429")
	next, tree2 := r.transaction(t, "uid-retry-429", pipeline.OutcomeRunning)
	if next.SpanContext.TraceID() == miss.SpanContext.TraceID() {
		t.Fatalf("the requeued claim of ns/retry-429 reused the capacity-miss trace")
	}
	if !linksTo(next, miss) || strAttr(next, "vksandbox.retry") != "true" {
		t.Errorf("the requeued transaction of ns/retry-429 is not marked as a retry linked to the miss (links %v)", next.Links)
	}
	sf2 := only(t, tree2, next, "claim.reconcile")
	if got := httpStatuses(childrenOf(tree2, sf2, "sandboxd.claim")); strings.Join(got, ",") != "200" {
		t.Errorf("the requeued claim of ns/retry-429 answered %v, want one 200", got)
	}
}

func linksTo(s, target tracetest.SpanStub) bool {
	for _, l := range s.Links {
		if l.SpanContext.TraceID() == target.SpanContext.TraceID() && l.SpanContext.SpanID() == target.SpanContext.SpanID() {
			return true
		}
	}
	return false
}
