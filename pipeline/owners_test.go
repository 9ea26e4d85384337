package pipeline_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// seedRow writes a row for a live VM into a state file, as a previous
// process (or the migration of a JSON claims document) left it, and
// starts an engine over it once sandboxd has vouched for the row.
func seedRow(t *testing.T, env *simEnv, key string, c store.Claim, mod func(*pipeline.Config)) (*pipeline.Engine, *store.Store, *reporter, pool.ClaimResponse) {
	t.Helper()
	vm, err := env.root.Claim(context.Background(), pool.ClaimRequest{Template: template, TTLSeconds: 3600, ClaimRef: key})
	if err != nil {
		t.Fatal(err)
	}
	c.ID, c.Token, c.Address, c.Deadline = vm.ID, vm.Token, vm.OwnerAddr, vm.Deadline
	c.ClaimedAt = time.Now().UTC().Truncate(time.Second)
	path := previousStateFile(t, map[string]store.Claim{key: c})
	st := openStore(t, path, false)
	rep := newReporter()
	cfg := testConfig(env.root, st, rep)
	if mod != nil {
		mod(&cfg)
	}
	e := startEngine(t, cfg)
	<-e.Verified()
	return e, st, rep, vm
}

// A row migrated from the JSON claims document records no owner. That is
// its own state, not a bare Pod's: the delete of a Pod without an owner
// (such as the stub restored from the row) does not release it, an owner
// lookup's release verdict does, a same-owner replacement adopts it, and the
// first Pod of the row's own UID fills its owner in.
func TestOwnerUnknownRowIsNeitherBareNorReleasedWithoutAnOwnersVerdict(t *testing.T) {
	unknown := store.Claim{PodUID: "uid-ref", Owner: store.OwnerUnknown}
	t.Run("bare-delete-preserves", func(t *testing.T) {
		env := newSim(t, sim.Config{})
		e, st, _, vm := seedRow(t, env, "ns/m", unknown, nil)
		res, err := e.Delete(context.Background(), pipeline.PodRef{Key: "ns/m", UID: "uid-ref"}, verdict(true, "bare-pod"))
		if err != nil || res.Verdict.Release || res.Verdict.Reason != pipeline.ReasonOwnerUnknown {
			t.Fatalf("delete = %+v, %v; want preserved as owner-unknown", res, err)
		}
		if _, ok := st.Get("ns/m"); !ok || !alive(env, vm.ID) {
			t.Fatal("the migrated row's VM was released by a bare delete")
		}
	})
	t.Run("owner-verdict-releases", func(t *testing.T) {
		env := newSim(t, sim.Config{})
		e, _, _, vm := seedRow(t, env, "ns/m", unknown, nil)
		gone := func(context.Context) pipeline.Verdict {
			return pipeline.Verdict{Release: true, Reason: "owner-gone", FromOwner: true}
		}
		if _, err := e.Delete(context.Background(), pipeline.PodRef{Key: "ns/m", UID: "uid-ref", OwnerUID: "o"}, gone); err != nil {
			t.Fatal(err)
		}
		if alive(env, vm.ID) {
			t.Fatal("an owner lookup's release verdict did not release")
		}
	})
	t.Run("same-owner-replacement-adopts", func(t *testing.T) {
		env := newSim(t, sim.Config{})
		e, st, rep, vm := seedRow(t, env, "ns/m", unknown, nil)
		it := intent("ns/m", "uid-new", "owner-1")
		it.Ref.Owner = "agents.x-k8s.io/v1alpha1/Sandbox/m"
		create(t, e, it)
		if run := rep.running(t, "uid-new"); run.claim.ID != vm.ID || !run.adopted {
			t.Fatalf("replacement Running on %s (adopted %v), want the migrated VM %s adopted", run.claim.ID, run.adopted, vm.ID)
		}
		if row, _ := st.Get("ns/m"); row.OwnerUID != "owner-1" || row.Owner != it.Ref.Owner || !row.OwnerKnown() {
			t.Errorf("row owner %q/%q, want the adopter's", row.OwnerUID, row.Owner)
		}
		if got := env.count("release"); got != 0 {
			t.Errorf("%d releases", got)
		}
	})
	t.Run("matching-uid-fills-the-owner", func(t *testing.T) {
		env := newSim(t, sim.Config{})
		e, st, rep, vm := seedRow(t, env, "ns/m", unknown, nil)
		it := intent("ns/m", "uid-ref", "owner-7")
		it.Ref.Owner = "agents.x-k8s.io/v1alpha1/Sandbox/m"
		create(t, e, it)
		if run := rep.running(t, "uid-ref"); run.claim.ID != vm.ID || run.adopted {
			t.Fatalf("Running on %s (adopted %v), want %s in place", run.claim.ID, run.adopted, vm.ID)
		}
		if row, _ := st.Get("ns/m"); row.OwnerUID != "owner-7" || !row.OwnerKnown() {
			t.Errorf("row owner %q/%q, want owner-7 filled in", row.OwnerUID, row.Owner)
		}
	})
}

// A claim preserved by an eviction whose owner is then deleted before any
// replacement comes is released by re-authorization against its recorded
// owner; one that a replacement adopted is not.
func TestPreservedClaimIsReleasedOnceItsRecordedOwnerIsGone(t *testing.T) {
	var ownerGone atomic.Bool
	owners := func(ctx context.Context, key pipeline.PodKey, c pipeline.ClaimView) pipeline.Verdict {
		if ownerGone.Load() {
			return pipeline.Verdict{Release: true, Reason: "owner-gone", FromOwner: true}
		}
		return pipeline.Verdict{Reason: "owner-alive", FromOwner: true}
	}
	r, clk := newLoopRig(t, sim.Config{}, func(c *pipeline.Config) { c.Owners = owners }, pipeline.LoopReauthorize)
	for _, k := range []string{"ns/left", "ns/adopted"} {
		create(t, r.eng, intent(k, "uid-"+k[3:], "owner-1"))
		run := r.rep.running(t, "uid-"+k[3:])
		if _, err := r.eng.Delete(context.Background(), run.ref, verdict(false, "owner-alive")); err != nil {
			t.Fatal(err)
		}
	}
	clk.pass(t, pipeline.LoopReauthorize) // the owner lives: nothing
	if got := r.env.count("release"); got != 0 {
		t.Fatalf("%d releases while the owner lives", got)
	}
	create(t, r.eng, intent("ns/adopted", "uid-next", "owner-1"))
	r.rep.running(t, "uid-next")
	ownerGone.Store(true)
	clk.pass(t, pipeline.LoopReauthorize)
	if n := len(r.env.sandboxesFor("ns/left")); n != 0 {
		t.Error("the preserved claim of a gone owner was kept")
	}
	if _, ok := r.store.Get("ns/left"); ok {
		t.Error("its row was kept")
	}
	if n := len(r.env.sandboxesFor("ns/adopted")); n != 1 {
		t.Error("a claim a live Pod adopted was released by re-authorization")
	}
}

// virtual-kubelet deletes a dangling Pod (one deleted while this process
// was down) once. When that release fails, the engine retries it itself,
// with the recorded owner's authority.
func TestFailedReleaseOfAGonePodIsRetriedByTheEngine(t *testing.T) {
	r, clk := newLoopRig(t, sim.Config{}, nil, pipeline.LoopReauthorize) // bareOnly: a bare row may go
	create(t, r.eng, intent("ns/d", "uid-d", ""))
	run := r.rep.running(t, "uid-d")
	r.env.sim.InjectFault(sim.Fault{Verb: pool.VerbRelease, Mode: "500"})
	if _, err := r.eng.Delete(context.Background(), run.ref, verdict(true, "bare-pod")); err == nil {
		t.Fatal("the release succeeded through a 500")
	}
	r.env.sim.ClearFaults()
	clk.pass(t, pipeline.LoopReauthorize)
	if n := len(r.env.sandboxesFor("ns/d")); n != 0 {
		t.Fatal("the failed release was never retried")
	}
	if _, ok := r.store.Get("ns/d"); ok {
		t.Fatal("the row outlived its released VM")
	}
}
