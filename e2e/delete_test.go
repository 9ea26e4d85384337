package e2e

import (
	"testing"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// waitReleases waits until the emulator has counted want releases.
func waitReleases(t *testing.T, n *vkNode, want int64) {
	t.Helper()
	testkit.WaitForCtx(t, waitFor, "releases", func(ctx testingCtx) (bool, error) { return n.counter("release_ok") >= want, nil })
	if got := n.counter("release_ok"); got != want {
		t.Fatalf("releases = %d, want %d", got, want)
	}
}

// waitPreserved waits for the node to log its preserve decision for a pod.
func waitPreserved(t *testing.T, n *vkNode, key string) {
	t.Helper()
	testkit.WaitForCtx(t, waitFor, "preserve decision for "+key, func(testingCtx) (bool, error) {
		return containsLine(n.vk.Log(), "VM preserved", key), nil
	})
}

func TestBarePodDeleteReleases(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "bare", n.Name))
	waitRunning(t, ns, "bare")
	deletePod(t, ns, "bare")
	waitReleases(t, n, 1)
	if len(n.live()) != 0 {
		t.Fatalf("emulator still holds %v", n.live())
	}
}

func TestDeleteWithLiveOwnerPreservesAndSameNamePodAdopts(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	owner := createOwner(t, ns, "box")
	createPod(t, sandboxPod(ns, "box", n.Name, ownedBy(owner)))
	first := waitRunning(t, ns, "box")
	deletePod(t, ns, "box")
	waitPreserved(t, n, ns+"/box")

	createPod(t, sandboxPod(ns, "box", n.Name, ownedBy(owner)))
	second := waitRunning(t, ns, "box")
	if first.UID == second.UID {
		t.Fatal("the replacement Pod has the old UID")
	}
	if second.Annotations[kube.AnnClaimID] != first.Annotations[kube.AnnClaimID] || second.Status.PodIP != first.Status.PodIP {
		t.Fatalf("replacement got claim %s at %s, want the same VM %s at %s",
			second.Annotations[kube.AnnClaimID], second.Status.PodIP, first.Annotations[kube.AnnClaimID], first.Status.PodIP)
	}
	if c, r := n.counter("claim_ok"), n.counter("release"); c != 1 || r != 0 {
		t.Fatalf("claims = %d, releases = %d; want exactly 1 claim and no release", c, r)
	}
}

func TestDeleteWithOwnerGoneReleases(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	runThenOrphan(t, n, ns, "gone")
	waitReleases(t, n, 1)
}

func TestDeleteWithOwnerInTeardownReleases(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	owner := createOwner(t, ns, "teardown", "e2e.test/hold") // the finalizer keeps it, with a deletionTimestamp
	createPod(t, sandboxPod(ns, "teardown", n.Name, ownedBy(owner)))
	waitRunning(t, ns, "teardown")
	deleteOwner(t, ns, "teardown")
	deletePod(t, ns, "teardown")
	waitReleases(t, n, 1)
}

func TestDeleteWithRotatedOwnerUIDReleases(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	old := createOwner(t, ns, "rot")
	createPod(t, sandboxPod(ns, "rot", n.Name, ownedBy(old)))
	waitRunning(t, ns, "rot")
	deleteOwner(t, ns, "rot")
	createOwner(t, ns, "rot") // same name, new UID
	deletePod(t, ns, "rot")
	waitReleases(t, n, 1)
}

func TestOwnerGetErrorPreserves(t *testing.T) {
	// Every owner GET times out: the verdict must be preserve, even though
	// the owner is in fact gone.
	n := startNode(t, sim.Config{}, "--owner-get-timeout", "1ns")
	ns := newNamespace(t)
	owner := createOwner(t, ns, "err")
	createPod(t, sandboxPod(ns, "err", n.Name, ownedBy(owner)))
	waitRunning(t, ns, "err")
	deleteOwner(t, ns, "err")
	deletePod(t, ns, "err")
	waitPreserved(t, n, ns+"/err")
	if r := n.counter("release"); r != 0 {
		t.Fatalf("%d releases after an owner GET error, want 0", r)
	}
	if len(n.live()) != 1 {
		t.Fatalf("the VM is gone: %v", n.live())
	}
}

func TestOwnerOfUnservedKindPreserves(t *testing.T) {
	// A 404 that does not name the object (the endpoint does not exist) says
	// nothing about the owner: preserve.
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	owner := createOwner(t, ns, "ghost")
	owner.SetAPIVersion("nothere.example.com/v1")
	createPod(t, sandboxPod(ns, "ghost", n.Name, ownedBy(owner)))
	waitRunning(t, ns, "ghost")
	deletePod(t, ns, "ghost")
	waitPreserved(t, n, ns+"/ghost")
	if r := n.counter("release"); r != 0 {
		t.Fatalf("%d releases, want 0", r)
	}
}
