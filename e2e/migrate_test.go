package e2e

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// A node upgraded from a provider that kept a JSON claims document starts
// on that claims.json, whose rows record no owner. The Pod of such a row is
// gone, so virtual-kubelet deletes its restored stub at startup: that is no
// authority over the VM, which is preserved. A same-name Pod under an owner then
// adopts it, and its owner's deletion releases it.
func TestMigratedRowWithUnknownOwnerIsPreservedThenAdopted(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	vm, err := n.simClient(t).Claim(context.Background(), pool.ClaimRequest{Template: "default", TTLSeconds: 3600, ClaimRef: ns + "/p"})
	if err != nil {
		t.Fatal(err)
	}
	n.stop()
	ref := map[string]any{"claims": map[string]any{ns + "/p": map[string]any{
		"id": vm.ID, "token": vm.Token, "address": vm.OwnerAddr, "podUID": "uid-of-a-reference-pod",
		"claimedAt": time.Now().UTC().Format(time.RFC3339), "deadline": vm.Deadline.Format(time.RFC3339Nano),
	}}}
	b, err := json.Marshal(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.state, b, 0o600); err != nil {
		t.Fatal(err)
	}
	n.start()
	n.waitReady()
	testkit.WaitForCtx(t, waitFor, "the restored stub's delete preserved as owner-unknown", func(context.Context) (bool, error) {
		return containsLine(n.vk.Log(), "VM preserved", ns+"/p", "owner-unknown"), nil
	})
	if !n.holds(vm.ID) {
		t.Fatal("the migrated row's VM was released by the stub's delete")
	}
	owner := createOwner(t, ns, "p")
	createPod(t, sandboxPod(ns, "p", n.Name, ownedBy(owner)))
	if got := waitRunning(t, ns, "p").Annotations[kube.AnnClaimID]; got != vm.ID {
		t.Fatalf("the Pod runs %s, want the migrated VM %s adopted", got, vm.ID)
	}
	if c := n.counter("claim_ok"); c != 1 {
		t.Errorf("claim_ok = %d, want 1 (the migrated claim only)", c)
	}
	deleteOwner(t, ns, "p")
	deletePod(t, ns, "p")
	testkit.WaitForCtx(t, waitFor, "the VM released once its adopted owner is gone", func(context.Context) (bool, error) { return !n.holds(vm.ID), nil })
}
