package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/testkit"
)

// A Pod is deleted and a same-name replacement, identical to it, created
// while the node's Pod watch is down; the informer then catches up by a
// relist, which reports the key changed from the old Pod to the new one as
// one update. virtual-kubelet compares an update's two Pods without their
// UIDs and drops it when they match, so the node must hand it over as the
// delete and the create it is: the replacement runs, on the old Pod's VM.
//
// The old Pod never had a status written (its claim is held at sandboxd
// until the watch is down), so the two Pods are identical.
func TestReplacementSeenOnlyByARelistRuns(t *testing.T) {
	proxy := newR2Proxy(t)
	n := startNode(t, sim.Config{Pools: map[pool.Key]int{{Template: "default"}: 4}}, "--kubeconfig", proxy.Kubeconfig)
	ns := newNamespace(t)
	owner := createOwner(t, ns, "relist")

	release := n.Sim.HoldNextClaim()
	t.Cleanup(release)
	old := createPod(t, sandboxPod(ns, "relist", n.Name, ownedBy(owner)))
	testkit.WaitForCtx(t, waitFor, "the old Pod's claim held at sandboxd", func(context.Context) (bool, error) {
		return n.counter("claim") == 1, nil
	})

	proxy.cutPodWatch()
	deletePod(t, ns, "relist")
	replacement := createPod(t, sandboxPod(ns, "relist", n.Name, ownedBy(owner)))
	release() // the old Pod's claim finishes: its row, owned by the same owner, waits for adoption
	testkit.WaitForCtx(t, waitFor, "the node's Pod watch and list refused", func(context.Context) (bool, error) {
		return proxy.podsRefused.Load() >= 1, nil
	})
	proxy.restorePodWatch()

	got := waitPod(t, ns, "relist", "replacement Running", func(p *corev1.Pod) bool {
		return p.UID == replacement.UID && isRunning(p)
	})
	if got.UID == old.UID {
		t.Fatalf("pod %s/relist: the old generation is Running", ns)
	}
	if claims, releases := n.counter("claim_ok"), n.counter("release"); claims != 1 || releases != 0 {
		t.Fatalf("sandboxd made %d VMs and had %d releases; want the old Pod's one VM, adopted", claims, releases)
	}
}
