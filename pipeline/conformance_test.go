package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// Behaviour against the real sandboxd (the emulator's default mode): who
// owns which VM, what a release 404 means, and leases the node caps.

// foreignVM is another client's claim on the same sandboxd, under the bare
// "<namespace>/<name>" claim_ref sandbox-operator uses.
func foreignVM(t *testing.T, c *pool.Client, key string) pool.ClaimResponse {
	t.Helper()
	r, err := c.Claim(context.Background(), pool.ClaimRequest{Template: template, ClaimRef: key, TTLSeconds: 3600})
	if err != nil {
		t.Fatalf("foreign claim %s: %v", key, err)
	}
	return r
}

func alive(env *simEnv, id string) bool {
	for _, s := range env.sim.Sandboxes() {
		if s.ID == id {
			return true
		}
	}
	return false
}

// Each claim carries this node's claim_ref and labels and asks for no
// redirect; a meshed node then boots the VM locally instead of naming a peer.
func TestClaimCarriesThisNodesMarksAndAsksNoRedirect(t *testing.T) {
	r := newRig(t, sim.Config{Mesh: true, Pools: map[pool.Key]int{{Template: template}: 0}}, nil)
	create(t, r.eng, intent("ns/a", "uid-a", "owner-a"))
	run := r.rep.running(t, "uid-a")
	rows := r.env.sandboxesFor("ns/a")
	if len(rows) != 1 || rows[0].ID != run.claim.ID {
		t.Fatalf("this node's VMs for ns/a = %v, want the Running claim %s", rows, run.claim.ID)
	}
	md := rows[0].Metadata
	if md[pipeline.LabelManagedBy] != pipeline.ManagedBy || md[pipeline.LabelNode] != testNode ||
		md[pipeline.LabelPodUID] != "uid-a" || md[pipeline.LabelOwnerUID] != "owner-a" {
		t.Errorf("labels = %v", md)
	}
	if got := r.env.count("claim_redirect"); got != 0 {
		t.Errorf("claim_redirect = %d: the claim did not ask for no redirect", got)
	}
}

// Another client's VM under the same "<namespace>/<name>" is never
// recovered, adopted, released or reported: not at startup, not on a lost
// claim answer, not on a delete without a row.
func TestForeignVMUnderTheSameNameIsNeverTouched(t *testing.T) {
	env := newSim(t, sim.Config{})
	foreign := foreignVM(t, env.root, "ns/p")
	rep := newReporter()
	st := openStore(t, tempStorePath(t), false)
	obs := &orphanObs{}
	cfg := testConfig(env.root, st, rep)
	cfg.OrphanObserver = obs
	clk := driveLoops(&cfg, pipeline.LoopOrphanScan)
	e := startEngine(t, cfg)
	select {
	case <-e.Listed():
	case <-time.After(10 * time.Second):
		t.Fatal("the startup listing never succeeded")
	}

	// A delete without a row finds nothing of ours, whatever the verdict.
	res, err := e.Delete(context.Background(), pipeline.PodRef{Key: "ns/p", UID: "uid-0"}, verdict(true, "bare-pod"))
	if err != nil || res.Held {
		t.Fatalf("delete without a row = %+v, %v; want nothing held", res, err)
	}
	// A claim whose answer is lost is recovered from this node's VMs only.
	env.sim.InjectFault(sim.Fault{Verb: pool.VerbClaim, Mode: "lose-response", Count: 1})
	create(t, e, intent("ns/p", "uid-1", ""))
	run := rep.running(t, "uid-1")
	if run.claim.ID == foreign.ID {
		t.Fatal("the foreign VM was recovered as this Pod's claim")
	}
	clk.pass(t, pipeline.LoopOrphanScan)
	if len(obs.verdicts) != 1 || obs.verdicts[0] != [3]int{0, 0, 0} {
		t.Errorf("orphan verdicts = %v, want none: the foreign VM is not this node's", obs.verdicts)
	}
	if _, err := e.Delete(context.Background(), run.ref, verdict(true, "bare-pod")); err != nil {
		t.Fatal(err)
	}
	if !alive(env, foreign.ID) {
		t.Fatal("the foreign VM was released")
	}
	if n := len(env.sandboxesFor("ns/p")); n != 0 {
		t.Errorf("%d VMs of ours left for ns/p after the release, want 0", n)
	}
}

// Recovery takes a VM only when it fits the intent: another template, or a
// VM made for another owner generation under the Pod's own claim_ref (its
// ownerReferences were edited), is released instead (it was never
// delivered), and the Pod gets a fresh claim.
func TestRecoveryComparesTemplateAndOwnerGeneration(t *testing.T) {
	env := newSim(t, sim.Config{Pools: map[pool.Key]int{{Template: template}: 4, {Template: "other"}: 4}})
	lost := preClaim(t, env.root, "ns/p", "uid-1", "owner-old")
	rep := newReporter()
	e := startEngine(t, testConfig(env.root, openStore(t, tempStorePath(t), false), rep))
	create(t, e, intent("ns/p", "uid-1", "owner-new"))
	run := rep.running(t, "uid-1")
	if run.claim.ID == lost.ID {
		t.Fatal("a VM made for another owner generation was recovered")
	}
	if alive(env, lost.ID) {
		t.Error("the other generation's undelivered VM was left behind")
	}
	if n := len(env.sandboxesFor("ns/p")); n != 1 {
		t.Errorf("%d VMs for ns/p, want exactly 1", n)
	}
}

// A row with a wrong token: sandboxd answers the release 404 (it cannot
// tell a wrong token from an unknown id). With the root token the VM is
// confirmed still there and released by id.
func TestRelease404WithRootTokenConfirmsAndReleasesByID(t *testing.T) {
	env := newSim(t, sim.Config{})
	vm := preClaim(t, env.root, "ns/w", "uid-w", "")
	path := tempStorePath(t)
	seed := openStore(t, path, false)
	bad := store.Claim{ID: vm.ID, Token: "not-the-sandbox-token-0000", Address: vm.OwnerAddr, PodUID: "uid-w",
		ClaimedAt: time.Now().UTC().Truncate(time.Second), Deadline: vm.Deadline}
	if err := seed.Put(context.Background(), "ns/w", bad); err != nil {
		t.Fatal(err)
	}
	if err := seed.Close(); err != nil {
		t.Fatal(err)
	}
	rep := newReporter()
	st := openStore(t, path, false)
	e := startEngine(t, testConfig(env.root, st, rep))
	<-e.Verified()
	res, err := e.Delete(context.Background(), pipeline.PodRef{Key: "ns/w", UID: "uid-w"}, verdict(true, "bare-pod"))
	if err != nil || !res.Held || !res.Verdict.Release {
		t.Fatalf("delete = %+v, %v", res, err)
	}
	if alive(env, vm.ID) {
		t.Fatal("the VM lives on after a release answered 404 for a wrong token")
	}
	if _, ok := st.Get("ns/w"); ok {
		t.Error("the row outlived its released VM")
	}
	rep.waitFor(t, "the root-token fallback decision", func(evs []event) bool {
		return find(evs, "decision", "", "release/root-token-fallback") >= 0
	})
}

// Without the root token a release 404 cannot be confirmed: the row and its
// credential are kept, and the delete fails so that it is retried.
func TestRelease404WithTenantTokenKeepsTheClaim(t *testing.T) {
	env := newSim(t, sim.Config{})
	vm := preClaim(t, env.node, "ns/w", "uid-w", "")
	path := tempStorePath(t)
	seed := openStore(t, path, false)
	if err := seed.Put(context.Background(), "ns/w", store.Claim{ID: vm.ID, Token: "not-the-sandbox-token-0000", PodUID: "uid-w",
		ClaimedAt: time.Now().UTC().Truncate(time.Second), Deadline: vm.Deadline}); err != nil {
		t.Fatal(err)
	}
	if err := seed.Close(); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, path, false)
	e := startEngine(t, testConfig(env.node, st, newReporter()))
	<-e.Verified()
	for range 2 {
		_, err := e.Delete(context.Background(), pipeline.PodRef{Key: "ns/w", UID: "uid-w"}, verdict(true, "bare-pod"))
		if !errors.Is(err, pipeline.ErrReleaseUnconfirmed) {
			t.Fatalf("delete: %v, want ErrReleaseUnconfirmed", err)
		}
	}
	if _, ok := st.Get("ns/w"); !ok || !alive(env, vm.ID) {
		t.Fatal("an unconfirmed release dropped the row, or the VM")
	}
	if got := env.count("get"); got > 1 {
		t.Errorf("get requests = %d: a tenant token is asked for root-only reads in a loop", got)
	}
}

// A Pod that asks for longer than the node grants is renewed ahead of each
// deadline until its lifetime is reached; each grant is made durable.
func TestLeaseIsRenewedUpToTheAskedLifetime(t *testing.T) {
	r, clk := newLoopRig(t, sim.Config{MaxTTL: 4 * time.Second}, nil, pipeline.LoopLeaseWatch)
	it := intent("ns/long", "uid-long", "")
	it.Spec.TTLSeconds = 3600
	create(t, r.eng, it)
	run := r.rep.running(t, "uid-long")
	if d := time.Until(run.claim.Deadline); d > 5*time.Second {
		t.Fatalf("first grant ends in %v, want the node's 4s cap", d)
	}
	// The row holds an older grant, a second short of the node's: a renewal
	// asked now is granted a later deadline. Renewal is due three check
	// intervals (3s) before the deadline; the tick is set two seconds before
	// it, so it is due however long the claim took on a loaded machine.
	older, _ := r.store.Get("ns/long")
	older.Deadline = older.Deadline.Add(-time.Second)
	if err := r.store.Put(context.Background(), "ns/long", older); err != nil {
		t.Fatal(err)
	}
	run.claim.Deadline = older.Deadline
	clk.passAt(t, pipeline.LoopLeaseWatch, older.Deadline.Add(-2*time.Second))
	evs := r.rep.waitFor(t, "a renewal", func(evs []event) bool { return find(evs, "renewed", "uid-long", "") >= 0 })
	renewed := evs[find(evs, "renewed", "uid-long", "")].claim
	if !renewed.Deadline.After(run.claim.Deadline) {
		t.Fatalf("renewed deadline %v not after %v", renewed.Deadline, run.claim.Deadline)
	}
	if row, _ := r.store.Get("ns/long"); !row.Deadline.Equal(renewed.Deadline) {
		t.Errorf("the state file holds %v, want the renewed %v", row.Deadline, renewed.Deadline)
	}
	if got := r.env.count("renew_ok"); got != 1 {
		t.Errorf("renew_ok = %d, want 1", got)
	}

	// A failed renewal warns and backs off instead of retrying every tick.
	// Its pass runs 10ms before a tick, so that the next look comes at once.
	r.env.sim.InjectFault(sim.Fault{Verb: "renew", Mode: "500"})
	now := clk.beforeTick(time.Now(), 10*time.Millisecond)
	due, _ := r.store.Get("ns/long")
	due.Deadline = now.Add(time.Second) // due again
	if err := r.store.Put(context.Background(), "ns/long", due); err != nil {
		t.Fatal(err)
	}
	clk.passAt(t, pipeline.LoopLeaseWatch, now)
	r.rep.waitFor(t, "a renewal warning", func(evs []event) bool {
		return find(evs, "warning", "uid-long", pipeline.ReasonRenewFailed) >= 0
	})
	renews := r.env.count("renew")
	clk.passAt(t, pipeline.LoopLeaseWatch, now.Add(10*time.Millisecond))
	if got := r.env.count("renew"); got != renews {
		t.Errorf("renew requests %d → %d: a failed renewal was retried at once", renews, got)
	}
	r.env.sim.ClearFaults()
}

// A Pod that asks for no more than the node grants is never renewed.
func TestLeaseWithinTheGrantIsNotRenewed(t *testing.T) {
	r, clk := newLoopRig(t, sim.Config{MaxTTL: time.Hour}, nil, pipeline.LoopLeaseWatch)
	create(t, r.eng, intent("ns/short", "uid-short", ""))
	r.rep.running(t, "uid-short")
	clk.passAt(t, pipeline.LoopLeaseWatch, time.Now().Add(59*time.Minute))
	if got := r.env.count("renew"); got != 0 {
		t.Errorf("renew requests = %d, want 0", got)
	}
}
