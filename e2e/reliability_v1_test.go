package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// On V1 a row carries no claimed_at: the only evidence of a VM's age is
// when the node first listed it. Claims finalized after their caller gave
// up show up only after their Pods were served other VMs, first while the
// node runs, then across a SIGKILL in the middle of a burst (the claims
// the kill cut finish after the restarted node looked for them). Once the
// settle window has passed no VM is leaked and no Pod holds two.
func TestV1LateClaimsAndAKillMidBurstLeaveOneVMPerPod(t *testing.T) {
	ns := newNamespace(t)
	// Real sandboxd cancels a claim whose caller went away; one behind a
	// proxy that hides the disconnect finishes it, and that is the VM at
	// stake here.
	n := startNode(t, sim.Config{APIVersion: sim.V1, FinishDetachedClaims: true, Pools: map[pool.Key]int{{Template: "default"}: 32}},
		"--sandboxd-claim-timeout", "2s", "--settle-window", "3s", "--orphan-scan-interval", "300ms")
	v := v1Run{n: n, ns: ns}

	// While the node runs: four claims held past their attempts.
	release := n.Sim.HoldNextClaims(4)
	t.Cleanup(release)
	v.burst(t, "late", 4)
	v.waitRunning(t)
	// The late VMs were not in the index when their keys looked.
	if got := v.vmsByPod(); !v.onePerPod(got) {
		t.Fatalf("VMs by Pod before the held claims finished: %v, want only the delivered ones", got)
	}
	release()
	v.settled(t)

	// A burst cut by a SIGKILL: six of its twelve claims are held at
	// sandboxd when the node dies, and finish only after the restarted
	// node listed the node and served their Pods other VMs.
	release = n.Sim.HoldNextClaims(6)
	t.Cleanup(release)
	held := n.counter("claim_held")
	v.burst(t, "burst", 12)
	testkit.WaitForCtx(t, waitFor, "six claims of the burst held at sandboxd", func(context.Context) (bool, error) {
		return n.counter("claim_held")-held >= 6, nil
	})
	if err := n.vk.Kill(waitFor); err != nil {
		t.Fatal(err)
	}
	n.srv.CloseClientConnections()
	n.start()
	n.waitReady()
	v.waitRunning(t)
	if got := v.vmsByPod(); !v.onePerPod(got) {
		t.Fatalf("VMs by Pod after the restart, before the held claims finished: %v, want only the delivered ones", got)
	}
	release()
	v.settled(t)
}

// v1Run is the Pods of one namespace on one node.
type v1Run struct {
	n    *vkNode
	ns   string
	pods []string
}

// burst creates k Pods named prefix-0.. at once.
func (v *v1Run) burst(t *testing.T, prefix string, k int) {
	t.Helper()
	for i := range k {
		name := fmt.Sprintf("%s-%d", prefix, i)
		createPod(t, sandboxPod(v.ns, name, v.n.Name))
		v.pods = append(v.pods, name)
	}
}

// waitRunning waits until every Pod runs, and returns the VM each runs.
func (v *v1Run) waitRunning(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range v.pods {
		out[v.ns+"/"+name] = waitRunning(t, v.ns, name).Annotations[kube.AnnClaimID]
	}
	return out
}

// vmsByPod is the live VMs of the namespace's Pods, by Pod key.
func (v *v1Run) vmsByPod() map[string][]string {
	out := map[string][]string{}
	for _, s := range v.n.live() {
		if key := podKeyOf(s); strings.HasPrefix(key, v.ns+"/") {
			out[key] = append(out[key], s.ID)
		}
	}
	return out
}

// onePerPod: every Pod has exactly one live VM.
func (v *v1Run) onePerPod(byPod map[string][]string) bool {
	if len(byPod) != len(v.pods) {
		return false
	}
	for _, ids := range byPod {
		if len(ids) != 1 {
			return false
		}
	}
	return true
}

// settled: every held claim finished (each made a VM beside its Pod's),
// and then, once older than the settle window, every VM no Pod runs was
// released: each Pod holds exactly the VM it runs, the state file says
// so, and every extra VM sandboxd made was released (no Pod was deleted).
func (v *v1Run) settled(t *testing.T) {
	t.Helper()
	n := v.n
	testkit.WaitForCtx(t, waitFor, "every claim sandboxd received made its VM", func(context.Context) (bool, error) {
		return n.counter("claim") == n.counter("claim_ok"), nil
	})
	if made := n.counter("claim_ok"); made <= int64(len(v.pods)) {
		t.Fatalf("sandboxd made %d VMs for %d Pods: the held claims made none", made, len(v.pods))
	}
	running := v.waitRunning(t)
	var got map[string][]string
	var rows map[string]string
	var made, released int64
	testkit.WaitForCtx(t, waitFor, "one VM per Pod, the one it runs, none leaked", func(context.Context) (bool, error) {
		got, rows = v.vmsByPod(), n.r2StateClaims(t)
		made, released = n.counter("claim_ok"), n.counter("release_ok")
		if !v.onePerPod(got) || released != made-int64(len(v.pods)) {
			return false, nil
		}
		for key, ids := range got {
			if running[key] != ids[0] || rows[key] != ids[0] {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("settled: %d Pods, %d VMs made, %d released", len(v.pods), made, released)
}
