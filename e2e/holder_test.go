package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
)

// secondProcess is another vk-sandbox for node (another host, or another
// state directory on this one) in front of the same sandboxd; it is not
// waited for.
func secondProcess(t *testing.T, node, sandboxdURL string) *kubetest.VKSandbox {
	t.Helper()
	vk, err := kubetest.NewVKSandbox(kubetest.VKSandboxOptions{
		Bin: vkBin, Dir: t.TempDir(), Node: node, Kubeconfig: env.Kubeconfig, SandboxdURL: sandboxdURL, Token: rootToken,
		Args: []string{"--orphan-scan-interval", "0", "--log-level", "debug"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vk.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vk.Terminate() })
	return vk
}

// holderLease is the node's holder Lease as the apiserver has it.
func holderLease(t *testing.T, node string) (holder string, renewed metav1.MicroTime) {
	t.Helper()
	l, err := env.Clientset().CoordinationV1().Leases(kube.HolderLeaseNamespace).Get(t.Context(), kube.HolderLeaseName(node), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the holder lease of %s: %v", node, err)
	}
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		renewed = *l.Spec.RenewTime
	}
	return holder, renewed
}

// nodeIdentity is the holder identity of n's process: its host name and
// the instance id kept beside its state file.
func nodeIdentity(t *testing.T, n *vkNode) string {
	t.Helper()
	id, err := os.ReadFile(filepath.Join(filepath.Dir(n.state), "holder-id"))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	return host + "/" + strings.TrimSpace(string(id))
}

// A second vk-sandbox started with a live node's name exits non-zero with
// the holder named in its error, and claims nothing; the first keeps
// serving: its Pod stays Running on the one VM it claimed, it renews its
// lease, and a Pod created afterwards runs on it.
func TestASecondProcessForALiveNodeIsRefusedAndTheFirstServesOn(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "p0", n.Name))
	waitRunning(t, ns, "p0")
	first := nodeIdentity(t, n)
	if holder, _ := holderLease(t, n.Name); holder != first {
		t.Fatalf("the holder lease names %q, want the first process, %q", holder, first)
	}

	second := secondProcess(t, n.Name, n.srv.URL)
	err := second.Wait()
	t.Logf("the second process: %v\n%s", err, second.Tail(5))
	if err == nil {
		t.Fatal("a second process for a live node's name exited 0")
	}
	if log := second.Log(); !strings.Contains(log, "is served by another vk-sandbox") || !strings.Contains(log, first) {
		t.Errorf("the refusal does not name the holder %q:\n%s", first, second.Tail(10))
	}

	_, before := holderLease(t, n.Name)
	testkit.WaitFor(t, waitFor, "the first process renewed its lease", func() bool {
		holder, renewed := holderLease(t, n.Name)
		return holder == first && renewed.After(before.Time)
	})
	createPod(t, sandboxPod(ns, "p1", n.Name))
	waitRunning(t, ns, "p1")
	if p := waitRunning(t, ns, "p0"); p.Status.Phase != corev1.PodRunning {
		t.Fatalf("p0 after the refused start: %s", p.Status.Phase)
	}
	if c := n.counter("claim_ok"); c != 2 {
		t.Errorf("claims = %d for two Pods, want 2: a VM was claimed twice", c)
	}
	if got := len(n.live()); got != 2 {
		t.Errorf("%d VMs held, want 2", got)
	}
}

// A process pointed at a Node that exists and is not a virtual-kubelet
// node (a host's real Node) exits non-zero and leaves the Node alone.
func TestAProcessRefusesANodeThatIsNotAVirtualKubeletNode(t *testing.T) {
	name := fmt.Sprintf("real-host-%d-%d", os.Getpid(), nodeSeq.Add(1))
	cs := env.Clientset()
	if _, err := cs.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"kubernetes.io/hostname": name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	srv := simtest.Start(t, sim.Config{RootToken: rootToken})
	vk := secondProcess(t, name, srv.URL)
	if err := vk.Wait(); err == nil {
		t.Fatal("a process for a kubelet's Node exited 0")
	}
	if log := vk.Log(); !strings.Contains(log, "not a virtual-kubelet node") {
		t.Errorf("the refusal does not say why:\n%s", vk.Tail(10))
	}
	node, err := cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver's own not-ready taint may be there; none of ours is.
	for _, taint := range node.Spec.Taints {
		if taint.Key == kube.TaintKey || taint.Key == kube.TaintSandboxdUnavailable {
			t.Errorf("the real Node carries %s after the refused start", taint.Key)
		}
	}
	if node.Labels["type"] != "" || nodeCondition(node, kube.ConditionSandboxdReady) != nil {
		t.Errorf("the real Node was written by the refused start: labels %v, conditions %v", node.Labels, node.Status.Conditions)
	}
}

// A clean shutdown clears the holder, so another process (another state
// directory: another holder identity) serves the node at once instead of
// being refused until the old lease expires.
func TestACleanShutdownLetsTheNextProcessTakeTheNodeAtOnce(t *testing.T) {
	n := startNode(t, sim.Config{})
	if err := n.vk.Terminate(); err != nil {
		t.Fatalf("graceful shutdown: %v", err)
	}
	if holder, _ := holderLease(t, n.Name); holder != "" {
		t.Fatalf("after a clean shutdown the holder lease names %q, want none", holder)
	}
	next := secondProcess(t, n.Name, n.srv.URL)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	// WaitReady fails at once if the process exits (a refusal).
	if err := next.WaitReady(ctx, env.Clientset()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, waitFor, "the next process holds the lease", func() bool {
		holder, _ := holderLease(t, n.Name)
		return holder != "" && holder != nodeIdentity(t, n)
	})
}

// A host whose sandboxd is down from the start serves its node: /readyz
// (the DaemonSet's readiness probe) answers 200, so the host does not
// hold up a rollout, while the node carries the sandboxd-unavailable
// taint and SandboxdReady False for the scheduler.
func TestAHostWithSandboxdDownIsReadyAndItsNodeTainted(t *testing.T) {
	srv := simtest.Start(t, sim.Config{RootToken: rootToken})
	srv.Down() // sandboxd is down
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	n := launchNode(t, srv, rootToken, nil, []string{"--metrics-addr", metricsAddr, "--sandboxd-ping-interval", "200ms"})
	n.waitReady()
	node := waitNode(t, n.Name, "tainted sandboxd-unavailable=unreachable", func(node *corev1.Node) bool {
		c := nodeCondition(node, kube.ConditionSandboxdReady)
		return sandboxdTaint(node) == "unreachable" && c != nil && c.Status == corev1.ConditionFalse
	})
	if r := nodeCondition(node, corev1.NodeReady); r == nil || r.Status != corev1.ConditionTrue {
		t.Errorf("Ready = %+v", r)
	}
	code, body := testkit.Get(t, "http://"+metricsAddr+"/readyz?verbose", "")
	if code != http.StatusOK || !strings.Contains(string(body), "node holder: ok\n") || !strings.Contains(string(body), "sandboxd: unreachable: ") {
		t.Errorf("/readyz?verbose with sandboxd down: %d %q, want 200 naming the holder ok and sandboxd unreachable", code, body)
	}
}

// A SIGKILLed process leaves its lease unexpired; its replacement on the
// same host with the same state file is the same holder (the instance id
// kept beside the state file) and takes the node back at once instead of
// being refused for a lease duration.
func TestASIGKILLedProcessOnTheSameHostTakesItsNodeBackAtOnce(t *testing.T) {
	n := startNode(t, sim.Config{})
	id := nodeIdentity(t, n)
	if err := n.vk.Kill(waitFor); err != nil {
		t.Fatal(err)
	}
	holder, killedAt := holderLease(t, n.Name)
	if holder != id {
		t.Fatalf("after SIGKILL the lease names %q, want the killed holder %q", holder, id)
	}
	n.start()
	// Only the new process can write the lease now: a renewal after the
	// kill is its acquisition. A refused start exits instead.
	testkit.WaitFor(t, waitFor, "the restarted process took the lease", func() bool {
		if _, exited := n.vk.Exited(); exited {
			return true
		}
		holder, renewed := holderLease(t, n.Name)
		return holder == id && renewed.After(killedAt.Time)
	})
	if got := nodeIdentity(t, n); got != id {
		t.Errorf("the restarted process is %q, want the same holder %q", got, id)
	}
	if err, exited := n.vk.Exited(); exited {
		t.Fatalf("the restarted process exited: %v\n%s", err, n.vk.Tail(10))
	}
}

// A process started while the apiserver is down does not exit: it tries
// to take its node's holder lease again and again, saying why, and once
// the apiserver is back it takes the lease, registers the node and claims
// its Pods. (Exiting at once, it would only be restarted into the same
// failure until its supervisor's restart limit gave up on it.)
func TestAProcessStartedDuringAnApiserverOutageWaitsForIt(t *testing.T) {
	proxy := newR2Proxy(t)
	proxy.goDown()
	margs, scrape := metricsArgs(t)
	base := strings.TrimSuffix(scrape, "/metrics")
	n := launchNode(t, simtest.Start(t, sim.Config{RootToken: rootToken, Pools: map[pool.Key]int{{Template: "default"}: 4}}),
		rootToken, nil, append([]string{"--kubeconfig", proxy.Kubeconfig}, margs...))
	testkit.WaitFor(t, waitFor, "two failed attempts to take the holder lease, logged", func() bool {
		return strings.Count(n.vk.Log(), "cannot take the node's holder lease yet") >= 2
	})
	if err, exited := n.vk.Exited(); exited {
		t.Fatalf("the process exited during the outage: %v\n%s", err, n.vk.Tail(10))
	}
	// Meanwhile it is alive to its liveness probe, and not ready, saying why.
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while waiting for the apiserver = %d %q, want 200", code, body)
	}
	if code, body := httpGet(t, base+"/readyz?verbose"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not held yet") {
		t.Errorf("/readyz while waiting for the apiserver = %d %q, want 503 naming the holder lease", code, body)
	}
	if proxy.downRefused.Load() < 2 {
		t.Errorf("%d requests reached the proxy while it was down, want at least 2", proxy.downRefused.Load())
	}
	proxy.comeBack()
	n.waitReady()
	if holder, _ := holderLease(t, n.Name); holder != nodeIdentity(t, n) {
		t.Errorf("the holder lease names %q, want this process, %q", holder, nodeIdentity(t, n))
	}
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "after-outage", n.Name))
	waitRunning(t, ns, "after-outage")
}
