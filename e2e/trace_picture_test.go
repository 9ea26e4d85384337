package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
	"github.com/cocoonstack/vk-sandbox/pool/store"
	"github.com/cocoonstack/vk-sandbox/telemetry"
	"github.com/cocoonstack/vk-sandbox/telemetry/spansvg"
)

// claimTraceSVG is the picture in docs/observability.md, relative to this
// package.
const claimTraceSVG = "../docs/img/claim-trace.svg"

// pictureSpans are the spans one claim's trace must have to be worth a
// picture (the telemetry contract (docs/observability.md)).
var pictureSpans = []string{
	"createOrUpdatePod", "claim.transaction", "queue.wait", "claim.reconcile",
	"sandboxd.claim", "store.commit", "status.push",
}

// The picture of a real trace in docs/observability.md. One claim runs
// through the product's own wiring (telemetry.Setup, the sandboxd client,
// the fsynced store, the pipeline, the virtual-kubelet node) against the
// real apiserver and the emulator, in this process, so that the SDK's
// in-memory exporter sees every span. The trace is rendered with spansvg;
// with VK_UPDATE_DOCS=1 the SVG is written to docs/img/claim-trace.svg,
// otherwise it is only checked: well-formed XML, every expected span named,
// no token drawn.
func TestClaimTracePicture(t *testing.T) {
	node, spans := runTracedNode(t)
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "traced", node.Name))
	waitRunning(t, ns, "traced")

	var tree []sdktrace.ReadOnlySpan
	testkit.WaitForCtx(t, waitFor, "the claim's trace with every expected span", func(context.Context) (bool, error) {
		tree = claimTree(spans.GetSpans(), ns, "traced")
		return hasSpans(tree, pictureSpans), nil
	})

	var b bytes.Buffer
	err := spansvg.Render(&b, tree, spansvg.Options{
		Title: "One claim transaction: Pod event received → Running pushed",
		Note:  "captured by the OTel SDK in-memory exporter from a real claim: kube-apiserver, virtual-kubelet, sandboxd emulator over HTTP, fsynced state file",
	})
	if err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	if err := testkit.WellFormedXML(svg); err != nil {
		t.Fatalf("the trace SVG is not well-formed XML: %v", err)
	}
	for _, name := range pictureSpans {
		if !strings.Contains(svg, ">"+name) {
			t.Errorf("the trace SVG does not name span %s", name)
		}
	}
	for _, sb := range node.Sim.Sandboxes() {
		if sb.Token != "" && strings.Contains(svg, sb.Token) {
			t.Errorf("the trace SVG shows the token of sandbox %s", sb.ID)
		}
	}
	if strings.Contains(svg, rootToken) {
		t.Error("the trace SVG shows the root token")
	}
	if os.Getenv("VK_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(claimTraceSVG, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d spans, %d bytes)", claimTraceSVG, len(tree), b.Len())
	}
}

// tracedNode is a virtual node run in this process.
type tracedNode struct {
	Name string
	Sim  *sim.Server
}

// runTracedNode wires a virtual node as cmd/vk-sandbox does, with
// telemetry.Setup given an in-memory span exporter, and waits until the
// node is Ready. Everything stops at test end, and the OTel globals Setup
// installed are reset.
func runTracedNode(t *testing.T) (*tracedNode, *tracetest.InMemoryExporter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	name := fmt.Sprintf("vk-e2e-%d-%d", os.Getpid(), nodeSeq.Add(1))

	spans := tracetest.NewInMemoryExporter()
	tel, err := telemetry.Setup(ctx, telemetry.Config{SpanExporter: spans, NodeName: name, Version: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	emu := simtest.Start(t, sim.Config{RootToken: rootToken, Pools: map[pool.Key]int{{Template: "default"}: 4}})
	// Built after Setup: a pool.Client takes its tracer when it is built.
	sbx := emu.Client(t, pool.ClientOptions{Token: rootToken, Observer: tel.Metrics.SandboxdObserver()})
	st, err := store.Open(filepath.Join(t.TempDir(), "state", "claims.json"), store.Options{Observer: tel.Metrics.StoreObserver()})
	if err != nil {
		t.Fatal(err)
	}
	key, err := st.NodeKey()
	if err != nil {
		t.Fatal(err)
	}
	cs, dyn := clients(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tlsCfg, err := kube.KubeletTLS("", "", name, "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := kube.NewDaemon(kube.DaemonConfig{
		Provider: kube.ProviderOptions{Authorizer: &kube.Authorizer{Dynamic: dyn}, Log: log, PodClient: cs.CoreV1()},
		Pipeline: pipeline.Config{NodeKey: key, Sandboxd: sbx, Store: st, Observer: tel.Metrics, Logger: log},
		Node: kube.NodeOptions{
			Name: name, ListenAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)), TLS: tlsCfg, Version: "e2e", Client: cs,
			EventRecorder: &record.FakeRecorder{},
		},
		Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
		_ = st.Close()
		_ = tel.Shutdown(context.Background())
		otel.SetTracerProvider(noop.NewTracerProvider())
	})

	testkit.WaitForCtx(t, waitFor, "node "+name+" Ready", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	return &tracedNode{Name: name, Sim: emu.Sim}, spans
}

// claimTree returns the spans of the claim.transaction of ns/name that
// ended Running: the transaction, everything under it, and its parent,
// virtual-kubelet's createOrUpdatePod. It returns nil while there is no
// such transaction. virtual-kubelet's spans above createOrUpdatePod are
// left out: its outermost one, handleQueueItem, starts while the worker is
// still idle waiting for a queue item, and would stretch the time axis by
// however long that was.
func claimTree(all tracetest.SpanStubs, ns, name string) []sdktrace.ReadOnlySpan {
	var root *tracetest.SpanStub
	for i, s := range all {
		if s.Name == "claim.transaction" && stubAttr(s, "k8s.namespace.name") == ns &&
			stubAttr(s, "k8s.pod.name") == name && stubAttr(s, "vksandbox.outcome") == "running" {
			root = &all[i]
		}
	}
	if root == nil {
		return nil
	}
	keep := map[trace.SpanID]bool{root.SpanContext.SpanID(): true}
	for grew := true; grew; { // add children of kept spans until none is new
		grew = false
		for _, s := range all {
			if id := s.SpanContext.SpanID(); !keep[id] && s.Parent.IsValid() && keep[s.Parent.SpanID()] {
				keep[id], grew = true, true
			}
		}
	}
	var out []sdktrace.ReadOnlySpan
	for _, s := range all {
		if keep[s.SpanContext.SpanID()] || s.SpanContext.SpanID() == root.Parent.SpanID() {
			out = append(out, s.Snapshot())
		}
	}
	return out
}

func stubAttr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func hasSpans(spans []sdktrace.ReadOnlySpan, names []string) bool {
	seen := map[string]bool{}
	for _, s := range spans {
		seen[s.Name()] = true
	}
	for _, n := range names {
		if !seen[n] {
			return false
		}
	}
	return true
}
