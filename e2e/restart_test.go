package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

type testingCtx = context.Context

func containsLine(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func TestRestartKeepsClaimsAndTheirCredentials(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	names := []string{"r0", "r1", "r2"}
	ids := map[string]string{}
	for _, name := range names {
		createPod(t, sandboxPod(ns, name, n.Name))
	}
	for _, name := range names {
		ids[name] = waitRunning(t, ns, name).Annotations[kube.AnnClaimID]
	}
	n.restart() // SIGTERM must exit 0, and never release
	if r := n.counter("release"); r != 0 {
		t.Fatalf("shutdown released %d VMs", r)
	}
	testkit.WaitForCtx(t, waitFor, "quarantine lifted", func(context.Context) (bool, error) {
		return containsLine(n.vk.Log(), "quarantine verification", `"lifted":3`), nil
	})
	cs, _ := clients(t)
	for _, name := range names {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning || p.Annotations[kube.AnnClaimID] != ids[name] {
			t.Fatalf("after restart %s: err=%v phase=%s claim=%s (want %s)", name, err, p.Status.Phase, p.Annotations[kube.AnnClaimID], ids[name])
		}
	}
	if c := n.counter("claim_ok"); c != int64(len(names)) {
		t.Fatalf("claims = %d after restart, want %d (no re-claim)", c, len(names))
	}
	// The credential survived: a delete after the restart still releases.
	deletePod(t, ns, "r0")
	waitReleases(t, n, 1)
}

func TestStartupRefusesAnUnwritableStatePath(t *testing.T) {
	n := startNode(t, sim.Config{})
	if err := n.vk.Terminate(); err != nil {
		t.Fatal(err)
	}
	// A state path below a regular file can never be created, even by root.
	for i, a := range n.vk.Args {
		if a == "--state-path" {
			n.vk.Args[i+1] = n.state + "/below-a-file/claims.json"
		}
	}
	n.start()
	if err := n.vk.Wait(); err == nil {
		t.Fatal("vk-sandbox started with an unwritable --state-path")
	}
	if !strings.Contains(n.vk.Log(), "below-a-file") {
		t.Fatalf("the startup error does not name the path:\n%s", n.vk.Log())
	}
}

// TestRestoreDecidesPodsDeletedWhileDown: a Running Pod is deleted while
// its node is down, so the next process never sees it in the apiserver.
// The stub restored from its state file row makes virtual-kubelet delete
// it anyway, and the delete is authorized by the owner the row recorded:
// the VM is preserved while that owner lives, and released once it was
// deleted too. Either way nothing is claimed again.
func TestRestoreDecidesPodsDeletedWhileDown(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ownerGone bool
	}{
		{"owner-alive-preserves", false},
		{"owner-gone-releases", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, sim.Config{})
			ns := newNamespace(t)
			owner := createOwner(t, ns, "owner")
			createPod(t, sandboxPod(ns, "gone", n.Name, ownedBy(owner)))
			id := waitRunning(t, ns, "gone").Annotations[kube.AnnClaimID]
			key := ns + "/gone"
			if err := n.vk.Terminate(); err != nil {
				t.Fatalf("graceful shutdown: %v", err)
			}
			// A grace-0 delete needs no kubelet: the Pod is gone at once.
			deletePod(t, ns, "gone")
			if tc.ownerGone {
				deleteOwner(t, ns, "owner")
			}
			if r := n.counter("release"); r != 0 {
				t.Fatalf("%d releases before the node came back", r)
			}
			n.start()
			n.waitReady()
			if tc.ownerGone {
				waitReleases(t, n, 1)
				if n.holds(id) {
					t.Fatalf("VM %s still live after its owner-gone delete", id)
				}
				testkit.WaitForCtx(t, waitFor, "the released row forgotten", func(context.Context) (bool, error) {
					rows, err := r1ReadState(n.state)
					_, held := rows[key]
					return err == nil && !held, err
				})
			} else {
				waitPreserved(t, n, key)
				if r := n.counter("release"); r != 0 {
					t.Fatalf("%d release calls for a Pod whose owner lives", r)
				}
				if !n.holds(id) {
					t.Fatalf("the preserved VM %s is gone", id)
				}
				if rows, err := r1ReadState(n.state); err != nil || rows[key].ID != id {
					t.Fatalf("state file row for %s = %+v (%v), want claim %s kept for a replacement", key, rows[key], err, id)
				}
			}
			if c := n.counter("claim_ok"); c != 1 {
				t.Errorf("claims = %d, want 1 (no re-claim)", c)
			}
		})
	}
}
