package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// A Pod without ttl-seconds (as sandbox-operator's mutator makes them)
// lives as long as its owner: on a node that grants short leases (here a
// 2 s cap), its VM is renewed ahead of every grant, stays Running on the
// same VM across several grants, and is released only when its owning
// Sandbox goes.
func TestAPodWithoutTTLKeepsItsVMAcrossGrantsUntilItsOwnerGoes(t *testing.T) {
	n := startNode(t, sim.Config{Pools: map[pool.Key]int{{Template: "default"}: 2}, MaxTTL: 2 * time.Second},
		"--lease-check-interval", "200ms")
	ns := newNamespace(t)
	owner := createOwner(t, ns, "forever")
	createPod(t, sandboxPod(ns, "forever", n.Name, ownedBy(owner)))
	first := waitRunning(t, ns, "forever")
	vm := first.Annotations[kube.AnnClaimID]
	start := time.Now()
	testkit.WaitForCtx(t, waitFor, "three grants renewed, the VM kept", func(context.Context) (bool, error) {
		return n.counter("renew_ok") >= 3 && n.holds(vm) && time.Since(start) > 4*time.Second, nil
	})
	p := waitRunning(t, ns, "forever")
	if p.Annotations[kube.AnnClaimID] != vm || p.Status.Reason != "" {
		t.Fatalf("after several grants the Pod runs %s (reason %q), want %s", p.Annotations[kube.AnnClaimID], p.Status.Reason, vm)
	}
	if n.counter("release") != 0 {
		t.Fatal("the VM was released while its owner lives")
	}
	deleteOwner(t, ns, "forever")
	deletePod(t, ns, "forever")
	testkit.WaitForCtx(t, waitFor, "the VM released with its owner", func(context.Context) (bool, error) {
		return !n.holds(vm) && n.counter("release_ok") == 1, nil
	})
}
