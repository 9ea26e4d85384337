package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
)

// R2: owner and apiserver faults. A Pod deletion is not VM authority
// (the delete authorization table (docs/pod-contract.md)): whatever happens to the Pods, the apiserver or the owner
// lookups, no VM is released unless its owner is known to be gone, and a
// same-name replacement Pod adopts the held VM (adoption, docs/pod-contract.md).
//
// None of these tests calls t.Parallel: TestR2APIServerDown stops the
// package's shared apiserver, which is only safe because a non-parallel
// top-level test never overlaps another test.

var graceZero = metav1.DeleteOptions{GracePeriodSeconds: new(int64)}

func TestR2DeleteOwnerAlive(t *testing.T) {
	pods := r2Pods()
	n := startNode(t, r2SimConfig(pods))
	f := newR2Fleet(t, n, pods)

	f.deletePods(f.names, graceZero)
	f.waitGone(f.names)
	f.waitDecisions(f.names, 1, r2MsgPreserved, kube.ReasonOwnerAlive)
	f.assertNoRelease("after deleting Pods with live owners")
	f.assertHeld(f.names)

	adopted := f.recreateAndAssertAdopted(f.names)
	f.assertNoRelease("after adoption")
	t.Logf("R2 DeleteOwnerAlive: pods=%d deletes=%d releases=%d adopted=%d claims=%d verdicts: %s",
		pods, len(f.names), n.counter("release"), adopted, n.counter("claim_ok"), f.reasons())
}

func TestR2APIServerDown(t *testing.T) {
	pods := r2Pods()
	proxy := newR2Proxy(t)
	// A long owner timeout: the held GETs must still be waiting when the
	// apiserver is gone, so their answer comes from the outage. DeletePod
	// runs in virtual-kubelet's workers, so there must be one per Pod for
	// every lookup to be in flight at once (the default is 64).
	n := startNode(t, r2SimConfig(pods), "--kubeconfig", proxy.Kubeconfig, "--owner-get-timeout", "120s",
		"--vk-workers", strconv.Itoa(max(64, pods)))
	f := newR2Fleet(t, n, pods)

	// Every Pod is deleted, and vk-sandbox has seen every delete: each
	// DeletePod has begun, so its verdict hangs on the owner GET alone. The
	// GETs are held, so none reaches the apiserver before it is gone. Each
	// key has its own lock, and the GET is made before the delete takes
	// it, so none waits behind another key's GET.
	proxy.hold()
	f.deletePods(f.names, graceZero)
	testkit.WaitForCtx(t, waitFor, "every delete seen by vk-sandbox, owner GETs held", func(context.Context) (bool, error) {
		seen := n.r2DeleteCalls()
		for _, name := range f.names {
			if seen[f.key(name)] == 0 {
				return false, nil
			}
		}
		return proxy.held.Load() > 0, nil
	})

	apiDown := true
	t.Cleanup(func() { // later tests share this apiserver
		if apiDown {
			if err := env.StartAPIServer(context.Background()); err != nil {
				t.Errorf("restart the shared apiserver: %v", err)
			}
		}
	})
	stopped := time.Now()
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	heldAtOutage := proxy.held.Load()
	proxy.release() // the lookups now meet an unreachable apiserver
	f.waitDecisions(f.names, 1, r2MsgPreserved, kube.ReasonOwnerGetError)
	// The proxy counts a failed forward before it answers, so every verdict
	// logged above is already counted.
	if e := proxy.ownerErrors.Load(); e < int64(pods) {
		t.Fatalf("only %d of %d owner GETs were answered by the outage", e, pods)
	}
	// The node's own traffic (watches, lease, status) fails too, and the
	// process survives it.
	testkit.WaitForCtx(t, waitFor, "vk-sandbox traffic failing during the outage", func(context.Context) (bool, error) {
		return proxy.otherErrors.Load() >= 3, nil
	})
	n.r2Alive(t, "during the apiserver outage")
	f.assertNoRelease("during the apiserver outage")
	f.assertHeld(f.names)
	outage := time.Since(stopped)

	if err := env.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	apiDown = false
	f.waitGone(f.names)
	n.r2Alive(t, "after the apiserver came back")
	f.assertNoRelease("after the apiserver came back")

	// Recovery: the node's watch and status pushes work again, and every
	// replacement adopts its held VM.
	adopted := f.recreateAndAssertAdopted(f.names)
	f.assertNoRelease("after adoption")
	n.r2Alive(t, "after adoption")
	t.Logf("R2 APIServerDown: pods=%d deletes=%d owner GETs held across the stop=%d answered by the outage=%d releases=%d adopted=%d outage=%v failed node requests=%d verdicts: %s",
		pods, len(f.names), heldAtOutage, proxy.ownerErrors.Load(), n.counter("release"), adopted,
		outage.Round(time.Millisecond), proxy.otherErrors.Load(), f.reasons())
}

func TestR2OwnerGetTimeout(t *testing.T) {
	pods := r2Pods()
	proxy := newR2Proxy(t)
	const timeout = 2 * time.Second
	n := startNode(t, r2SimConfig(pods), "--kubeconfig", proxy.Kubeconfig, "--owner-get-timeout", timeout.String())
	f := newR2Fleet(t, n, pods)

	// Owner GETs hang past --owner-get-timeout: the owner is unknown, so
	// every VM is preserved.
	proxy.hold()
	f.deletePods(f.names, graceZero)
	f.waitGone(f.names)
	f.waitDecisions(f.names, 1, r2MsgPreserved, kube.ReasonOwnerGetError)
	// vk-sandbox logs its verdict when its own timeout fires; the proxy
	// sees the abandoned request once the connection closes, a moment later.
	testkit.WaitForCtx(t, waitFor, "every held owner GET abandoned by vk-sandbox", func(context.Context) (bool, error) {
		return proxy.abandoned.Load() >= int64(pods), nil
	})
	f.assertNoRelease("while owner GETs time out")
	f.assertHeld(f.names)
	proxy.release()

	// GETs work again, the owners still exist: the held VMs are adopted,
	// and a second round of deletes is preserved on the owners' word.
	adopted := f.recreateAndAssertAdopted(f.names)
	f.deletePods(f.names, graceZero)
	f.waitGone(f.names)
	f.waitDecisions(f.names, 2, r2MsgPreserved, kube.ReasonOwnerAlive)
	f.assertNoRelease("with owner GETs working and owners alive")
	f.assertHeld(f.names)
	adopted += f.recreateAndAssertAdopted(f.names)

	// Real authority: one owner is deleted, then its Pod (as the garbage
	// collector would). Exactly that VM goes.
	victim, rest := f.names[0], f.names[1:]
	deleteOwner(t, f.ns, victim)
	f.deletePods([]string{victim}, graceZero)
	f.waitDecisions([]string{victim}, 3, r2MsgReleased, kube.ReasonOwnerGone)
	if r, ok := n.counter("release"), n.counter("release_ok"); r != 1 || ok != 1 {
		t.Fatalf("pod %s: sandboxd got %d release calls (%d ok), want exactly 1", f.key(victim), r, ok)
	}
	for _, s := range n.live() {
		if s.ID == f.vms[victim].ID {
			t.Fatalf("pod %s: VM %s still at sandboxd after its owner was deleted", f.key(victim), s.ID)
		}
	}
	if id, ok := n.r2StateClaims(t)[f.key(victim)]; ok {
		t.Fatalf("pod %s: state file still holds released claim %s", f.key(victim), id)
	}
	f.assertHeld(rest)
	t.Logf("R2 OwnerGetTimeout: pods=%d deletes=%d owner GETs timed out=%d (--owner-get-timeout %v) releases while unknown=0 adopted=%d released after owner delete=%d verdicts: %s",
		pods, 2*len(f.names)+1, proxy.abandoned.Load(), timeout, adopted, n.counter("release_ok"), f.reasons())
}

func TestR2NodeNotReadyEviction(t *testing.T) {
	pods := r2Pods()
	n := startNode(t, r2SimConfig(pods))
	f := newR2Fleet(t, n, pods)
	cs, _ := clients(t)
	ctx := context.Background()

	// The node lifecycle controller's view: Ready Unknown, then the
	// NoExecute unreachable taint.
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				node.Status.Conditions[i].Status = corev1.ConditionUnknown
				node.Status.Conditions[i].Reason = "NodeStatusUnknown"
				node.Status.Conditions[i].Message = "Kubelet stopped posting node status."
				node.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("node %s: mark Ready Unknown: %v", n.Name, err)
	}
	n.setTaint(t, unreachable, true)

	// The taint manager evicts: a normal delete (the Pod's grace period),
	// which vk-sandbox completes once it has decided.
	f.deletePods(f.names, metav1.DeleteOptions{})
	f.waitGone(f.names)
	f.waitDecisions(f.names, 1, r2MsgPreserved, kube.ReasonOwnerAlive)
	f.assertNoRelease("after the NotReady eviction")
	f.assertHeld(f.names)
	node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasTaint(node, unreachable) {
		t.Fatalf("node %s: the unreachable taint vanished during the eviction: %v", n.Name, node.Spec.Taints)
	}
	ready := "absent"
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = string(c.Status)
		}
	}

	n.setTaint(t, unreachable, false)
	adopted := f.recreateAndAssertAdopted(f.names)
	f.assertNoRelease("after adoption")
	t.Logf("R2 NodeNotReadyEviction: pods=%d deletes=%d releases=%d adopted=%d (Ready condition after the eviction: %s) verdicts: %s",
		pods, len(f.names), n.counter("release"), adopted, ready, f.reasons())
}

// setTaint adds (on) or removes a taint on the node's spec.
func (n *vkNode) setTaint(t *testing.T, taint corev1.Taint, on bool) {
	t.Helper()
	cs, _ := clients(t)
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var taints []corev1.Taint
		for _, tt := range node.Spec.Taints {
			if tt.Key != taint.Key || tt.Effect != taint.Effect {
				taints = append(taints, tt)
			}
		}
		if on {
			added := taint
			now := metav1.Now()
			added.TimeAdded = &now
			taints = append(taints, added)
		}
		node.Spec.Taints = taints
		_, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("node %s: set taint %s:%s=%v: %v", n.Name, taint.Key, taint.Effect, on, err)
	}
}

func hasTaint(node *corev1.Node, taint corev1.Taint) bool {
	for _, tt := range node.Spec.Taints {
		if tt.Key == taint.Key && tt.Effect == taint.Effect {
			return true
		}
	}
	return false
}
