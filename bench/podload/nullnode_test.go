package podload

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// nullEnv is a real apiserver, a namespace in it, and a built null node.
type nullEnv struct {
	ctx      context.Context
	env      *kubetest.Env
	cs       kubernetes.Interface
	bin, dir string
	ns       string
}

func startNullEnv(t *testing.T) *nullEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	e := &nullEnv{ctx: ctx, dir: t.TempDir()}
	var err error
	if e.bin, err = BuildNullNode(ctx, e.dir); err != nil {
		t.Fatal(err)
	}
	if e.env, err = kubetest.Start(ctx, kubetest.Options{Logf: t.Logf}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.env.Stop)
	if e.cs, err = Clientset(e.env.Config, DefaultContentType); err != nil {
		t.Fatal(err)
	}
	ns, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "null-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.ns = ns.Name
	return e
}

// runPods creates want Pods bound to node and waits until each is Running
// with a Pod IP.
func (e *nullEnv) runPods(t *testing.T, node string, want int) {
	t.Helper()
	tr := NewTracker(want)
	stop, err := Watch(e.ctx, e.cs, e.ns, metav1.ListOptions{}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	CreateAll(e.ctx, e.cs, tr, 4, SandboxPods(e.ns, node, want, nil), nil)
	select {
	case <-tr.Done():
	case <-e.ctx.Done():
		t.Fatalf("%d of %d Pods Running (with a Pod IP) before the deadline", tr.Running(), want)
	}
	if errs, last := tr.Errors(); errs > 0 {
		t.Fatalf("%d errors, the last: %s", errs, last)
	}
}

// The null node, the floor the benchmarks compare vk-sandbox with, writes
// Running (with a Pod IP) every Pod bound to its node name and no other,
// against a real apiserver, and exits 0 on SIGTERM.
func TestNullNodeWritesItsOwnPodsRunning(t *testing.T) {
	e := startNullEnv(t)
	ctx, cs := e.ctx, e.cs
	other := kubetest.SandboxPod(e.ns, "elsewhere", "another-node")
	if _, err := cs.CoreV1().Pods(e.ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := StartNullNode(ctx, e.bin, e.env.Kubeconfig, "null-a", DefaultContentType, filepath.Join(e.dir, "nullnode.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop() //nolint:errcheck // checked below; this one is for a failed test

	e.runPods(t, "null-a", 20)
	// The other node's Pod existed before the null node started: had its
	// watch taken it, it would have been the first one queued and written.
	got, err := cs.CoreV1().Pods(e.ns).Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase == corev1.PodRunning || got.Status.PodIP != "" {
		t.Errorf("the Pod bound to another node was written: phase %s, podIP %q", got.Status.Phase, got.Status.PodIP)
	}
	if err := n.Stop(); err != nil {
		t.Errorf("nullnode exit on SIGTERM: %v", err)
	}
}

// With -sandboxd, the null node is the floor of a node that claims: each
// of its Pods gets exactly one VM, claimed under the Pod's claim_ref, and
// a durable row in the state file naming that VM, before it is Running.
func TestClaimingNullNodeClaimsOneVMPerPodAndRecordsIt(t *testing.T) {
	e := startNullEnv(t)
	const token, want = "null-root-token-0123456789abcdef", 20
	emu := simtest.Start(t, sim.Config{RootToken: token, Pools: map[pool.Key]int{{Template: "default"}: want + 4}})
	s := emu.Sim
	state := filepath.Join(e.dir, "claims.state")
	n, err := StartNullNode(e.ctx, e.bin, e.env.Kubeconfig, "null-c", DefaultContentType, filepath.Join(e.dir, "nullnode.log"),
		ClaimArgs(emu.URL, token, state)...)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop() //nolint:errcheck // checked below; this one is for a failed test

	e.runPods(t, "null-c", want)
	if err := n.Stop(); err != nil {
		t.Fatalf("nullnode exit on SIGTERM: %v", err)
	}
	key, err := store.ReadNodeKey(state)
	if err != nil {
		t.Fatal(err)
	}
	id := pipeline.Identity{Node: "null-c", Key: key}
	vms := map[pipeline.PodKey]string{}
	for _, sb := range s.Sandboxes() {
		key, _, ok := id.Owns(sb, true)
		if !ok {
			t.Fatalf("VM %s claimed under claim_ref %q, not one of node null-c's", sb.ID, sb.ClaimRef)
		}
		if prev, dup := vms[key]; dup {
			t.Fatalf("Pod %s has two VMs, %s and %s", key, prev, sb.ID)
		}
		vms[key] = sb.ID
	}
	if len(vms) != want {
		t.Fatalf("%d VMs claimed, want one for each of %d Pods", len(vms), want)
	}
	st, err := store.Open(state, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Len() != want {
		t.Errorf("state file holds %d rows, want %d", st.Len(), want)
	}
	for key, vm := range vms {
		if c, ok := st.Get(string(key)); !ok || c.ID != vm || c.Token == "" {
			t.Errorf("state row of %s: %+v (present %v), want VM %s with its token", key, c, ok, vm)
		}
	}
}
