package e2e

import (
	"context"
	"testing"

	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/testkit"
)

// The core contracts hold on the oldest sandboxd the node supports (V1: no
// metadata, no ?claim_ref= filter, no token on the by-id read), on V2, and
// on the newest: a claim runs, a delete with a live owner preserves and the
// replacement adopts, the owner's delete releases, a bare Pod's delete
// releases, and a claim whose answer is lost ends with exactly one VM for
// its Pod and none leaked.
func TestContractsOnEverySandboxdVersion(t *testing.T) {
	for _, v := range []string{sim.V1, sim.V2, sim.LatestAPI} {
		t.Run(v, func(t *testing.T) {
			n := startNode(t, sim.Config{APIVersion: v, Pools: map[pool.Key]int{{Template: "default"}: 4}},
				"--sandboxd-claim-timeout", "500ms", "--settle-window", "1s", "--orphan-scan-interval", "300ms")
			ns := newNamespace(t)

			owner := createOwner(t, ns, "owned")
			createPod(t, sandboxPod(ns, "owned", n.Name, ownedBy(owner)))
			vm := waitRunning(t, ns, "owned").Annotations[kube.AnnClaimID]
			deletePod(t, ns, "owned") // an eviction: the owner lives
			createPod(t, sandboxPod(ns, "owned", n.Name, ownedBy(owner)))
			if got := waitRunning(t, ns, "owned").Annotations[kube.AnnClaimID]; got != vm {
				t.Fatalf("the replacement runs %s, want the preserved %s", got, vm)
			}
			if r := n.counter("release"); r != 0 {
				t.Fatalf("%d releases while the owner lives", r)
			}
			deleteOwner(t, ns, "owned")
			deletePod(t, ns, "owned")
			testkit.WaitForCtx(t, waitFor, "the owner's VM released", func(context.Context) (bool, error) { return !n.holds(vm), nil })

			createPod(t, sandboxPod(ns, "bare", n.Name))
			bare := waitRunning(t, ns, "bare").Annotations[kube.AnnClaimID]
			deletePod(t, ns, "bare")
			testkit.WaitForCtx(t, waitFor, "the bare Pod's VM released", func(context.Context) (bool, error) { return !n.holds(bare), nil })

			// Every claim's answer is lost until one was: the node looks the
			// claim up by claim_ref and ends with one VM for the Pod.
			n.Sim.SetLoseAnswerRate(1)
			createPod(t, sandboxPod(ns, "lost", n.Name))
			testkit.WaitForCtx(t, waitFor, "a claim answer lost", func(context.Context) (bool, error) {
				return n.counter("claim_answer_lost") >= 1, nil
			})
			n.Sim.SetLoseAnswerRate(0)
			lost := waitRunning(t, ns, "lost").Annotations[kube.AnnClaimID]
			testkit.WaitForCtx(t, waitFor, "one VM for the Pod, none leaked", func(context.Context) (bool, error) {
				live := n.live()
				return len(live) == 1 && live[0].ID == lost, nil
			})
		})
	}
}
