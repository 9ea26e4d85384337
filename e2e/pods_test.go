package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestNodeRegistersWithIdentityCapacityAndPort(t *testing.T) {
	n := startNode(t, sim.Config{}, "--node-ip", "192.0.2.10", "--node-cpu", "123", "--node-memory", "5Ti",
		"--node-pods", "777", "--node-labels", "sandbox.cocoonstack.io/runtime=sandboxd,zone=z1")
	cs, _ := clients(t)
	node, err := cs.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"type": "virtual-kubelet", kube.LabelRuntime: kube.RuntimeSandboxd, "zone": "z1"} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	// (The apiserver's TaintNodesByCondition admission adds its own
	// not-ready taint until a node controller clears it.)
	hasTaint := false
	for _, tn := range node.Spec.Taints {
		hasTaint = hasTaint || (tn.Key == kube.TaintKey && tn.Value == "sandboxd" && tn.Effect == corev1.TaintEffectNoSchedule)
	}
	if !hasTaint {
		t.Errorf("taint %s=sandboxd:NoSchedule missing: %+v", kube.TaintKey, node.Spec.Taints)
	}
	if a := node.Status.Addresses; len(a) != 2 || a[0].Type != corev1.NodeInternalIP || a[0].Address != "192.0.2.10" ||
		a[1].Type != corev1.NodeHostName || a[1].Address != n.Name {
		t.Errorf("addresses = %+v", a)
	}
	want := map[corev1.ResourceName]string{corev1.ResourceCPU: "123", corev1.ResourceMemory: "5Ti", corev1.ResourcePods: "777"}
	for r, v := range want {
		if q := node.Status.Capacity[r]; q.String() != v {
			t.Errorf("capacity %s = %s, want %s", r, q.String(), v)
		}
		if q := node.Status.Allocatable[r]; q.String() != v {
			t.Errorf("allocatable %s = %s, want %s", r, q.String(), v)
		}
	}
	_, port, _ := net.SplitHostPort(n.vk.ListenAddr())
	if got := fmt.Sprint(node.Status.DaemonEndpoints.KubeletEndpoint.Port); got != port {
		t.Errorf("kubelet endpoint port = %s, want %s (from --listen-addr)", got, port)
	}
	// Ready is maintained by a node Lease.
	testkit.WaitForCtx(t, waitFor, "node lease", func(ctx context.Context) (bool, error) {
		_, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil, nil
	})
}

func TestSandboxPodGoesRunningWithTheVMAddress(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	created := createPod(t, sandboxPod(ns, "sb", n.Name, func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "side:1"})
	}))
	p := waitRunning(t, ns, "sb")
	// The node writes status from the Pod's metadata and status alone;
	// the apiserver keeps the spec it stored.
	if !apiequality.Semantic.DeepEqual(created.Spec, p.Spec) {
		t.Errorf("the status writes changed the spec:\ncreated %+v\nRunning %+v", created.Spec, p.Spec)
	}
	cs, _ := clients(t)
	live := n.live()
	if len(live) != 1 {
		t.Fatalf("emulator holds %d sandboxes, want 1", len(live))
	}
	id := live[0].ID
	if want := claimRefOf(t, n.identity(t), pipeline.JoinKey(ns, "sb"), string(p.UID)); live[0].ClaimRef != want {
		t.Errorf("claim_ref = %q, want %q", live[0].ClaimRef, want)
	}
	if p.Annotations[kube.AnnClaimID] != id {
		t.Errorf("claim-id annotation = %q, want %q", p.Annotations[kube.AnnClaimID], id)
	}
	// The VM's release credential stays in the state file: neither the
	// Pod object nor the Node carries it (nor the root token vk-sandbox
	// holds), in any field.
	secrets := map[string]string{"the sandbox token of " + id: live[0].Token, "the root token": rootToken}
	if live[0].Token == "" {
		t.Fatalf("emulator row %s has no token: nothing to search for", id)
	}
	node, err := cs.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for what, obj := range map[string]any{"the Running Pod": p, "the Node": node} {
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		for name, tok := range secrets {
			if i := bytes.Index(b, []byte(tok)); i >= 0 {
				t.Errorf("%s carries %s: …%s…", what, name, excerpt(b, i, len(tok)))
			}
		}
	}
	if ip := net.ParseIP(p.Status.PodIP); ip == nil || p.Status.HostIP != p.Status.PodIP ||
		len(p.Status.PodIPs) != 1 || p.Status.PodIPs[0].IP != p.Status.PodIP {
		t.Errorf("podIP %q hostIP %q podIPs %+v", p.Status.PodIP, p.Status.HostIP, p.Status.PodIPs)
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.PodScheduled} {
		found := false
		for _, c := range p.Status.Conditions {
			found = found || (c.Type == ct && c.Status == corev1.ConditionTrue)
		}
		if !found {
			t.Errorf("condition %s not True: %+v", ct, p.Status.Conditions)
		}
	}
	if len(p.Status.ContainerStatuses) != 2 {
		t.Fatalf("container statuses = %+v", p.Status.ContainerStatuses)
	}
	for _, cst := range p.Status.ContainerStatuses {
		if !cst.Ready || cst.State.Running == nil || cst.ImageID != "sandboxd://"+id {
			t.Errorf("container status %+v", cst)
		}
	}
	if p.Status.StartTime == nil {
		t.Fatal("no startTime")
	}
	// The node caches Pods without managedFields and writes status from
	// that copy: the apiserver still records who wrote what.
	var creator, status bool
	for _, m := range p.ManagedFields {
		creator = creator || (m.Subresource == "" && m.FieldsV1 != nil)
		status = status || (m.Subresource == "status" && m.FieldsV1 != nil)
	}
	if !creator || !status {
		t.Errorf("managedFields lost an entry (creator %v, status writer %v): %+v", creator, status, p.ManagedFields)
	}
	// startTime is the claim time and never moves between reads.
	again, _ := cs.CoreV1().Pods(ns).Get(context.Background(), "sb", metav1.GetOptions{})
	if !again.Status.StartTime.Equal(p.Status.StartTime) {
		t.Errorf("startTime moved: %v → %v", p.Status.StartTime, again.Status.StartTime)
	}
	if len(events(t, ns, "sb", kube.EventClaimed)) == 0 {
		testkit.WaitForCtx(t, waitFor, "SandboxClaimed event", func(context.Context) (bool, error) { return len(events(t, ns, "sb", kube.EventClaimed)) > 0, nil })
	}
	if !n.stateFileHolds(id) {
		t.Errorf("state file does not hold claim %s", id)
	}
}

func TestInvalidAnnotationsFailTheCreateWithoutAClaim(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	cases := map[string]func(*corev1.Pod){
		"no-template":   func(p *corev1.Pod) { delete(p.Annotations, kube.AnnTemplate) },
		"bad-ttl":       annotate(kube.AnnTTL, "ten"),
		"negative-ttl":  annotate(kube.AnnTTL, "-5"),
		"wrong-runtime": annotate(kube.AnnRuntime, "kata"),
	}
	for name, m := range cases {
		createPod(t, sandboxPod(ns, name, n.Name, m))
	}
	for name := range cases {
		p := waitPod(t, ns, name, "failed by the provider", func(p *corev1.Pod) bool { return p.Status.Reason == "ProviderFailed" })
		if !strings.Contains(p.Status.Message, ns+"/"+name) {
			t.Errorf("%s: message %q does not name the pod", name, p.Status.Message)
		}
	}
	if c := n.counter("claim"); c != 0 {
		t.Fatalf("%d claim requests reached sandboxd, want 0", c)
	}
}

func TestCapacityMissStaysPendingWithReasonThenClaims(t *testing.T) {
	n := startNode(t, sim.Config{})
	n.Sim.InjectFault(sim.Fault{Verb: "claim", Mode: "429"})
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "full", n.Name))
	p := waitPod(t, ns, "full", "Pending with a capacity reason", func(p *corev1.Pod) bool { return p.Status.Reason == pipeline.ReasonCapacity })
	if p.Status.Phase != corev1.PodPending {
		t.Fatalf("phase = %s, want Pending (a capacity miss is never terminal)", p.Status.Phase)
	}
	testkit.WaitForCtx(t, waitFor, "capacity Event", func(context.Context) (bool, error) {
		return len(events(t, ns, "full", pipeline.ReasonCapacity)) > 0, nil
	})
	n.Sim.ClearFaults()
	waitRunning(t, ns, "full")
	if c := n.counter("claim_ok"); c != 1 {
		t.Fatalf("claims = %d, want 1", c)
	}
}

func TestTwoHundredPodsAtOnceAllRunWithExactlyTwoHundredClaims(t *testing.T) {
	n := startNode(t, sim.Config{Pools: nil})
	ns := newNamespace(t)
	const total = 200
	cs, _ := clients(t)
	// The creates run outside the test goroutine: they return their error
	// (t.Fatal must not be called there).
	var g errgroup.Group
	g.SetLimit(16)
	for i := 0; i < total; i++ {
		g.Go(func() error {
			p := sandboxPod(ns, fmt.Sprintf("burst-%03d", i), n.Name)
			if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create pod %s/%s: %w", ns, p.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitForCtx(t, waitFor, "200 Pods Running", func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		running := 0
		for i := range l.Items {
			if isRunning(&l.Items[i]) {
				running++
			}
		}
		return running == total, nil
	})
	if c := n.counter("claim_ok"); c != total {
		t.Fatalf("claims = %d, want exactly %d", c, total)
	}
}
