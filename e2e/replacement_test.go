package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// A Pending Pod is deleted and a same-name replacement, identical in spec,
// is created before virtual-kubelet's worker takes the key: the two
// informer events make one sync. virtual-kubelet then never calls DeletePod
// for the old Pod; it asks GetPod, and calls UpdatePod only if the Pod it
// gets differs from the new one in spec, labels or annotations (it does
// not compare UIDs). The replacement must still be claimed and run.
//
// The worker is held deterministically: virtual-kubelet runs one sync
// worker here, and it is kept busy deleting another Pod whose owner GET
// the proxy holds. A Pod created after the replacement shows that both of
// its events reached the queue (the Pod watch is ordered).
func TestReplacementSyncedTogetherWithTheDeleteItReplacesRuns(t *testing.T) {
	runReplacementSyncedWithTheDelete(t, false)
}

// The same, with a replacement made from the old Pod as the apiserver
// shows it (kubectl get -o yaml, then create): it carries the old Pod's
// sandbox.cocoonstack.io/pod-uid stamp, so its annotations match the
// provider's copy exactly. It must still be taken for a new generation.
func TestReplacementCopiedWithTheOldPodsStampRuns(t *testing.T) {
	runReplacementSyncedWithTheDelete(t, true)
}

func runReplacementSyncedWithTheDelete(t *testing.T, copyStamp bool) {
	proxy := newR2Proxy(t)
	margs, scrapeURL := metricsArgs(t)
	n := startNode(t, sim.Config{Pools: map[pool.Key]int{{Template: "default"}: 8}},
		append(margs, "--kubeconfig", proxy.Kubeconfig, "--vk-workers", "1")...)
	ns := newNamespace(t)

	// The blocker holds a VM, so its delete asks its owner.
	blocker := createOwner(t, ns, "blocker")
	createPod(t, sandboxPod(ns, "blocker", n.Name, ownedBy(blocker)))
	waitRunning(t, ns, "blocker")

	// The Pod to replace stays Pending: sandboxd answers every claim 429.
	n.Sim.SetDraining(true)
	owner := createOwner(t, ns, "same")
	old := createPod(t, sandboxPod(ns, "same", n.Name, ownedBy(owner)))
	waitPod(t, ns, "same", "Pending with a reason", func(p *corev1.Pod) bool {
		return p.UID == old.UID && p.Status.Phase == corev1.PodPending && p.Status.Reason != ""
	})

	adds := holdSyncWorker(t, proxy, ns, scrapeURL)
	before := adds()
	var copied map[string]string
	if copyStamp {
		copied = waitPod(t, ns, "same", "the stamp written back", func(p *corev1.Pod) bool {
			return p.Annotations[kube.AnnPodUID] == string(old.UID)
		}).Annotations
	}
	deletePod(t, ns, "same")
	replacement := createPod(t, sandboxPod(ns, "same", n.Name, ownedBy(owner), func(p *corev1.Pod) {
		for k, v := range copied {
			p.Annotations[k] = v
		}
	}))
	createPod(t, sandboxPod(ns, "after", n.Name))
	// The old Pod's delete and "after" each add a key; the replacement's
	// create finds its key queued already, and came before "after".
	testkit.WaitForCtx(t, waitFor, "the delete and the replacement queued behind the held worker", func(context.Context) (bool, error) {
		return adds() >= before+2, nil
	})
	proxy.release()
	n.Sim.SetDraining(false)

	got := waitPod(t, ns, "same", "replacement Running", func(p *corev1.Pod) bool {
		return p.UID == replacement.UID && isRunning(p)
	})
	waitRunning(t, ns, "after")
	if got.Status.Reason != "" {
		t.Fatalf("pod %s/same: Running with reason %q", ns, got.Status.Reason)
	}
	if claims := n.counter("claim_ok"); claims != 3 {
		t.Fatalf("sandboxd made %d VMs, want 3 (blocker, the replacement, after): the replaced Pod's VM must not be claimed twice", claims)
	}
}

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
	if claims, releases := n.counter("claim_ok"), n.counter("release"); claims != 1 || releases != 0 {
		t.Fatalf("sandboxd made %d VMs and had %d releases; want the old Pod's one VM, adopted", claims, releases)
	}
	// The status was written from the replacement's own object, on the
	// old Pod's VM: not from a copy of the old generation.
	live := n.live()
	if len(live) != 1 || got.Annotations[kube.AnnClaimID] != live[0].ID {
		t.Errorf("replacement claim-id %q; sandboxd holds %+v", got.Annotations[kube.AnnClaimID], live)
	}
	if stamp := got.Annotations[kube.AnnPodUID]; stamp != string(replacement.UID) || stamp == string(old.UID) {
		t.Errorf("replacement's pod-uid stamp %q, want its own UID %s (the old Pod's was %s)", stamp, replacement.UID, old.UID)
	}
}

// holdSyncWorker holds virtual-kubelet's one sync worker (--vk-workers 1)
// in the owner GET of the delete of ns's Running Pod "blocker", whose
// owner the proxy holds, so that what happens to a Pod next reaches the
// worker as one sync of its key. It returns the sync queue's add count, by
// which a test sees its events queued behind the held worker.
func holdSyncWorker(t *testing.T, proxy *r2Proxy, ns, scrapeURL string) (adds func() float64) {
	t.Helper()
	proxy.hold()
	deletePod(t, ns, "blocker")
	testkit.WaitForCtx(t, waitFor, "the sync worker held in the blocker's owner GET", func(context.Context) (bool, error) {
		return proxy.held.Load() >= 1, nil
	})
	return func() float64 {
		v, _ := metricSum(t, scrapeURL, "vksandbox_vk_queue_adds_total", `queue="syncPodsFromKubernetes"`)
		return v
	}
}
