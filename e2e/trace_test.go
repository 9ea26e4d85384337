package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// otlpSink is a minimal OTLP/HTTP trace receiver.
type otlpSink struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.spans = append(s.spans, ss.Spans...)
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func (s *otlpSink) all() []*tracepb.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*tracepb.Span(nil), s.spans...)
}

func attr(sp *tracepb.Span, key string) string {
	for _, kv := range sp.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

func hasAttr(sp *tracepb.Span, key string) bool {
	for _, kv := range sp.Attributes {
		if kv.Key == key {
			return true
		}
	}
	return false
}

// One claim through the real binary, the real apiserver and the emulator
// yields one trace: virtual-kubelet's createOrUpdatePod → our
// claim.transaction → queue.wait and claim.reconcile → the sandboxd HTTP
// call, the durable commit and the status push. sandboxd received the same
// trace id in traceparent. An owned Pod's delete, once its owner is gone,
// is claim.delete → delete.authorize → owner.get (where concurrent
// questions about one owner share a GET: vksandbox.singleflight.shared)
// and the release.
func TestOneTracePerClaimTransaction(t *testing.T) {
	sink := &otlpSink{}
	collector := httptest.NewServer(sink)
	defer collector.Close()
	n := startNodeEnv(t, sim.Config{}, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_SERVICE_NAME=vk-sandbox-e2e",
	})
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "traced", n.Name))
	waitRunning(t, ns, "traced")
	runThenOrphan(t, n, ns, "owned")
	waitReleases(t, n, 1)
	if err := n.vk.Terminate(); err != nil { // flushes spans on shutdown
		t.Fatal(err)
	}
	spans := sink.all()
	byID := map[string]*tracepb.Span{}
	for _, sp := range spans {
		byID[string(sp.SpanId)] = sp
	}
	var root *tracepb.Span
	for _, sp := range spans {
		if sp.Name == "claim.transaction" && attr(sp, "k8s.pod.name") == "traced" && attr(sp, "vksandbox.outcome") == "running" {
			root = sp
		}
	}
	if root == nil {
		t.Fatalf("no claim.transaction span for the pod among %d spans", len(spans))
	}
	children := func(parent *tracepb.Span) map[string]*tracepb.Span { return childrenOf(spans, parent) }
	top := children(root)
	for _, name := range []string{"queue.wait", "claim.reconcile"} {
		if top[name] == nil {
			t.Errorf("claim.transaction has no %s child (children: %v)", name, keys(top))
		}
	}
	if rc := top["claim.reconcile"]; rc != nil {
		inner := children(rc)
		for _, name := range []string{"sandboxd.claim", "store.commit", "status.push"} {
			if inner[name] == nil {
				t.Errorf("claim.reconcile has no %s child (children: %v)", name, keys(inner))
			}
		}
		if c, s := inner["sandboxd.claim"], inner["store.commit"]; c != nil && s != nil && s.StartTimeUnixNano < c.EndTimeUnixNano {
			t.Error("the durable commit started before the claim answered")
		}
		if s, p := inner["store.commit"], inner["status.push"]; s != nil && p != nil && p.StartTimeUnixNano < s.EndTimeUnixNano {
			t.Error("Running was pushed before the commit was durable")
		}
		if s := inner["store.commit"]; s != nil {
			for _, key := range []string{"vksandbox.store.batch_size", "vksandbox.store.bytes", "vksandbox.store.fsync_ms"} {
				if !hasAttr(s, key) {
					t.Errorf("store.commit has no %s attribute", key)
				}
			}
		}
	}
	// virtual-kubelet's span is the parent: one tree, not two.
	if parent := byID[string(root.ParentSpanId)]; parent == nil || parent.Name != "createOrUpdatePod" {
		t.Errorf("claim.transaction's parent is %v, want virtual-kubelet's createOrUpdatePod", parent)
	}
	checkDeleteTree(t, spans)
	// sandboxd saw the same trace id.
	want := hexID(root.TraceId)
	seen := false
	for _, id := range n.Sim.TraceIDs() {
		seen = seen || id == want
	}
	if !seen {
		t.Errorf("sandboxd never saw trace %s (saw %v)", want, n.Sim.TraceIDs())
	}
	// No span attribute carries a token.
	for _, sp := range spans {
		for _, kv := range sp.Attributes {
			if v := kv.Value.GetStringValue(); v == rootToken || (len(v) >= 32 && attrLooksLikeToken(n, v)) {
				t.Errorf("span %s attribute %s carries a token", sp.Name, kv.Key)
			}
		}
	}
}

// checkDeleteTree finds the owned Pod's claim.delete and asserts its tree.
func checkDeleteTree(t *testing.T, spans []*tracepb.Span) {
	t.Helper()
	children := func(parent *tracepb.Span) map[string]*tracepb.Span { return childrenOf(spans, parent) }
	var del *tracepb.Span
	for _, sp := range spans {
		if sp.Name == "claim.delete" && attr(sp, "k8s.pod.name") == "owned" && attr(sp, "vksandbox.verdict.reason") == "owner-gone" {
			del = sp
		}
	}
	if del == nil {
		t.Fatal("no claim.delete span with verdict owner-gone for the owned Pod")
	}
	top := children(del)
	auth, rel := top["delete.authorize"], top["sandboxd.release"]
	if auth == nil || rel == nil {
		t.Fatalf("claim.delete children %v, want delete.authorize and sandboxd.release", keys(top))
	}
	get := children(auth)["owner.get"]
	if get == nil {
		t.Fatalf("delete.authorize has no owner.get child (children: %v)", keys(children(auth)))
	}
	if !hasAttr(get, "vksandbox.singleflight.shared") || attr(get, "vksandbox.verdict.reason") != "owner-gone" {
		t.Errorf("owner.get attributes %v: want vksandbox.singleflight.shared and verdict reason owner-gone", get.Attributes)
	}
	if rel.StartTimeUnixNano < auth.EndTimeUnixNano {
		t.Error("the release started before the owner's verdict")
	}
}

// childrenOf maps the names of parent's child spans, in its trace, to them.
func childrenOf(spans []*tracepb.Span, parent *tracepb.Span) map[string]*tracepb.Span {
	out := map[string]*tracepb.Span{}
	for _, sp := range spans {
		if string(sp.ParentSpanId) == string(parent.SpanId) && string(sp.TraceId) == string(parent.TraceId) {
			out[sp.Name] = sp
		}
	}
	return out
}

func attrLooksLikeToken(n *vkNode, v string) bool {
	for _, sb := range n.live() {
		if sb.Token != "" && sb.Token == v {
			return true
		}
	}
	return false
}

func keys(m map[string]*tracepb.Span) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func hexID(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
