package e2e

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// The owner that decides is the one recorded with the claim. These tests
// pin it, and that every delete reaches the engine, at the level where the
// behaviour lives: a real apiserver, its watches and its relists.

// A bare Pod is deleted while the node's Pod watch is down. The informer
// learns of the delete only from the relist that follows, and hands it on
// as a cache.DeletedFinalStateUnknown, which virtual-kubelet's pod
// controller drops unless the node unwraps it. The delete must still reach
// the engine: the bare Pod's VM is released, and a later bare Pod of the
// same name gets a new VM, not the old one.
func TestADeleteSeenOnlyByARelistReleases(t *testing.T) {
	proxy := newR2Proxy(t)
	n := startNode(t, sim.Config{Pools: map[pool.Key]int{{Template: "default"}: 4}}, "--kubeconfig", proxy.Kubeconfig)
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "unseen", n.Name))
	first := waitRunning(t, ns, "unseen")

	proxy.cutPodWatch()
	deletePod(t, ns, "unseen")
	testkit.WaitForCtx(t, waitFor, "the node's Pod watch and list refused", func(context.Context) (bool, error) {
		return proxy.podsRefused.Load() >= 1, nil
	})
	proxy.restorePodWatch()

	testkit.WaitForCtx(t, waitFor, "the bare Pod's VM released after the relist", func(context.Context) (bool, error) {
		return n.counter("release_ok") == 1 && len(n.live()) == 0, nil
	})
	createPod(t, sandboxPod(ns, "unseen", n.Name))
	second := waitRunning(t, ns, "unseen")
	if a, b := first.Annotations[kube.AnnClaimID], second.Annotations[kube.AnnClaimID]; a == b {
		t.Fatalf("the new bare Pod adopted the deleted Pod's VM %s", a)
	}
}

// A Pod's ownerReferences are editable by whoever may patch Pods. Removing
// them, or pointing them at a Sandbox that does not exist, must not make
// the Pod's delete release the VM of a Sandbox that is alive: the owner
// recorded with the claim decides. The VM is preserved, and the live
// Sandbox's next Pod adopts it.
func TestAnEditedOwnerReferenceDoesNotReleaseALiveOwnersVM(t *testing.T) {
	n := startNode(t, sim.Config{Pools: map[pool.Key]int{{Template: "default"}: 4}})
	ns := newNamespace(t)
	cs, _ := clients(t)
	for _, tc := range []struct {
		name  string
		patch func(o metav1.OwnerReference) []metav1.OwnerReference
	}{
		{"removed", func(metav1.OwnerReference) []metav1.OwnerReference { return []metav1.OwnerReference{} }},
		{"pointed-elsewhere", func(o metav1.OwnerReference) []metav1.OwnerReference {
			o.Name, o.UID = "no-such-sandbox", types.UID("00000000-0000-0000-0000-000000000000")
			return []metav1.OwnerReference{o}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := createOwner(t, ns, tc.name)
			createPod(t, sandboxPod(ns, tc.name, n.Name, ownedBy(owner)))
			vm := waitRunning(t, ns, tc.name).Annotations[kube.AnnClaimID]
			pod, err := cs.CoreV1().Pods(ns).Get(context.Background(), tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": tc.patch(pod.OwnerReferences[0])}})
			if _, err := cs.CoreV1().Pods(ns).Patch(context.Background(), tc.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			released := n.counter("release")
			deletePod(t, ns, tc.name)
			createPod(t, sandboxPod(ns, tc.name, n.Name, ownedBy(owner)))
			if got := waitRunning(t, ns, tc.name).Annotations[kube.AnnClaimID]; got != vm {
				t.Fatalf("the live Sandbox's new Pod runs on %s, want its preserved VM %s", got, vm)
			}
			if r := n.counter("release"); r != released {
				t.Fatalf("sandboxd saw %d releases after the edited Pod's delete, want none", r-released)
			}
		})
	}
}

// A Pod that copies a live Sandbox's UID under another owner's name, made
// with the name of a Pod whose VM is preserved, must not adopt that VM: the
// recorded owner is compared in full. It waits (SandboxOwnerConflict), and
// its delete leaves the VM to its owner.
func TestACopiedOwnerUIDDoesNotAdopt(t *testing.T) {
	n := startNode(t, sim.Config{Pools: map[pool.Key]int{{Template: "default"}: 4}})
	ns := newNamespace(t)
	owner := createOwner(t, ns, "victim")
	createPod(t, sandboxPod(ns, "victim", n.Name, ownedBy(owner)))
	vm := waitRunning(t, ns, "victim").Annotations[kube.AnnClaimID]
	deletePod(t, ns, "victim") // as an eviction: preserved for the owner

	other := createOwner(t, ns, "intruder")
	createPod(t, sandboxPod(ns, "victim", n.Name, func(p *corev1.Pod) {
		ownedBy(other)(p)
		p.OwnerReferences[0].UID = owner.GetUID() // the victim's UID, another name
	}))
	waitPod(t, ns, "victim", "waiting on the owner conflict", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodPending && p.Status.Reason == "SandboxOwnerConflict"
	})
	deletePod(t, ns, "victim")
	createPod(t, sandboxPod(ns, "victim", n.Name, ownedBy(owner)))
	if got := waitRunning(t, ns, "victim").Annotations[kube.AnnClaimID]; got != vm {
		t.Fatalf("the owner's new Pod runs on %s, want its preserved VM %s", got, vm)
	}
	if r := n.counter("release"); r != 0 {
		t.Fatalf("sandboxd saw %d releases, want none", r)
	}
}

// kubectl delete sandbox --cascade=orphan leaves the Pod without an owner.
// Its VM is the deleted Sandbox's: the Pod's delete releases it, because
// the recorded owner is gone (not because the Pod now looks bare).
func TestAnOrphanedPodsDeleteReleasesItsGoneOwnersVM(t *testing.T) {
	n := startNode(t, sim.Config{Pools: map[pool.Key]int{{Template: "default"}: 4}})
	ns := newNamespace(t)
	cs, dyn := clients(t)
	owner := createOwner(t, ns, "orphaned")
	createPod(t, sandboxPod(ns, "orphaned", n.Name, ownedBy(owner)))
	waitRunning(t, ns, "orphaned")

	orphan := metav1.DeletePropagationOrphan
	if err := dyn.Resource(sandboxGVR).Namespace(ns).Delete(context.Background(), "orphaned", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	// What the garbage collector does for an orphaning delete (this suite
	// runs no controller manager): it drops the dependents' references,
	// then the owner's orphan finalizer.
	patch := []byte(`{"metadata":{"ownerReferences":[]}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(context.Background(), "orphaned", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	fin := []byte(`{"metadata":{"finalizers":[]}}`)
	if _, err := dyn.Resource(sandboxGVR).Namespace(ns).Patch(context.Background(), "orphaned", types.MergePatchType, fin, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitForCtx(t, waitFor, "the Sandbox gone", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(sandboxGVR).Namespace(ns).Get(ctx, "orphaned", metav1.GetOptions{})
		return err != nil, nil
	})
	deletePod(t, ns, "orphaned")
	testkit.WaitForCtx(t, waitFor, "the orphaned Pod's VM released", func(context.Context) (bool, error) {
		return n.counter("release_ok") == 1 && len(n.live()) == 0, nil
	})
}

// virtual-kubelet hands a Pod's delete and a same-name create synced
// together as an update, and never calls DeletePod for the old Pod. A
// replacement of another owner waits (SandboxOwnerConflict); when it is
// deleted too and the old Pod's owner then goes, the old VM must still be
// released: it is held for a Pod that is gone, so its recorded owner is
// asked again (--reauthorize-interval).
func TestAClaimReplacedWithoutADeleteIsReleasedWhenItsOwnerGoes(t *testing.T) {
	proxy := newR2Proxy(t)
	margs, scrapeURL := metricsArgs(t)
	n := startNode(t, sim.Config{Pools: map[pool.Key]int{{Template: "default"}: 8}},
		append(margs, "--kubeconfig", proxy.Kubeconfig, "--vk-workers", "1", "--reauthorize-interval", "300ms")...)
	ns := newNamespace(t)

	blocker := createOwner(t, ns, "blocker")
	createPod(t, sandboxPod(ns, "blocker", n.Name, ownedBy(blocker)))
	waitRunning(t, ns, "blocker")
	oldOwner := createOwner(t, ns, "old-owner")
	createPod(t, sandboxPod(ns, "same", n.Name, ownedBy(oldOwner)))
	vm := waitRunning(t, ns, "same").Annotations[kube.AnnClaimID]

	// The old Pod's delete and its replacement's create sync as one.
	adds := holdSyncWorker(t, proxy, ns, scrapeURL)
	before := adds()
	deletePod(t, ns, "same")
	newOwner := createOwner(t, ns, "new-owner")
	createPod(t, sandboxPod(ns, "same", n.Name, ownedBy(newOwner)))
	createPod(t, sandboxPod(ns, "after", n.Name))
	testkit.WaitForCtx(t, waitFor, "the delete and the replacement queued behind the held worker", func(context.Context) (bool, error) {
		return adds() >= before+2, nil
	})
	proxy.release()
	waitPod(t, ns, "same", "the replacement waiting on the owner conflict", func(p *corev1.Pod) bool {
		return p.Status.Reason == "SandboxOwnerConflict"
	})
	deletePod(t, ns, "same")
	waitRunning(t, ns, "after")
	if !n.holds(vm) {
		t.Fatalf("VM %s released while its recorded owner lives", vm)
	}
	deleteOwner(t, ns, "old-owner")
	testkit.WaitForCtx(t, waitFor, "the replaced Pod's VM released once its owner went", func(context.Context) (bool, error) {
		return !n.holds(vm), nil
	})
}
