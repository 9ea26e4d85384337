package pipeline_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// ownerAlive answers every recorded owner lookup "alive", as the kube
// package's authorizer does for a Sandbox that exists with the recorded
// name and UID.
func ownerAlive(context.Context, pipeline.PodKey, pipeline.ClaimView) pipeline.Verdict {
	return pipeline.Verdict{Reason: "owner-alive", FromOwner: true}
}

// A delete's verdict comes from the owner recorded with the claim, never
// from the deleted Pod's ownerReferences, which anyone who may patch Pods
// can remove or point elsewhere. The Pod's own verdict (here: a bare Pod's
// release) is not even asked for a row that records its owner.
func TestTheRecordedOwnerDecidesADeleteNotThePod(t *testing.T) {
	r := newRig(t, sim.Config{}, func(c *pipeline.Config) { c.Owners = ownerAlive })
	create(t, r.eng, intent("ns/p", "uid-p", "owner-1"))
	run := r.rep.running(t, "uid-p")
	asked := false
	res, err := r.eng.Delete(context.Background(), run.ref, func(context.Context) pipeline.Verdict {
		asked = true
		return pipeline.Verdict{Release: true, Reason: "bare-pod"}
	})
	if err != nil || res.Verdict.Release || res.Verdict.Reason != "owner-alive" {
		t.Fatalf("delete = %+v, %v; want preserved by the recorded owner (owner-alive)", res, err)
	}
	if asked {
		t.Error("the Pod's own ownerReference was asked for a row that records its owner")
	}
	if !alive(r.env, run.claim.ID) {
		t.Fatal("the VM of a live recorded owner was released")
	}
}

// Adoption compares the recorded owner in full. A Pod whose controller
// owner has the recorded owner's UID under another name does not adopt the
// preserved VM: it waits, and the VM stays its owner's.
func TestACopiedOwnerUIDUnderAnotherNameDoesNotAdopt(t *testing.T) {
	r := newRig(t, sim.Config{}, func(c *pipeline.Config) { c.Owners = ownerAlive })
	create(t, r.eng, intent("ns/p", "uid-p", "owner-1"))
	run := r.rep.running(t, "uid-p")
	if _, err := r.eng.Delete(context.Background(), run.ref, verdict(false, "owner-alive")); err != nil {
		t.Fatal(err)
	}
	forged := intent("ns/p", "uid-forged", "owner-1")
	forged.Ref.Owner = "agents.x-k8s.io/v1alpha1/Sandbox/intruder"
	create(t, r.eng, forged)
	r.rep.pending(t, "uid-forged", pipeline.ReasonOwnerConflict, 1)
	if n := countOf(r.rep.snapshot(), "running", "uid-forged", ""); n != 0 {
		t.Fatal("a Pod with a copied owner UID adopted the VM")
	}
	if row, _ := r.store.Get("ns/p"); row.PodUID != "uid-p" || row.Owner != run.ref.Owner {
		t.Fatalf("row now %s owned by %q, want the owner's %s / %q", row.PodUID, row.Owner, "uid-p", run.ref.Owner)
	}
}

// A row of an older format records its owner's UID but not its name. A
// Pod adopts it only when its named owner, read fresh, is the object with
// that UID.
func TestAnUnnamedOwnerIsAdoptedOnlyByItsVerifiedOwner(t *testing.T) {
	for _, tc := range []struct {
		name  string
		owner string // the name the Pod's owner lookup finds with the recorded UID
		adopt bool
	}{{"verified", "owner-1", true}, {"another-name", "someone-else", false}} {
		t.Run(tc.name, func(t *testing.T) {
			env := newSim(t, sim.Config{})
			owners := func(_ context.Context, _ pipeline.PodKey, c pipeline.ClaimView) pipeline.Verdict {
				if c.Owner == "agents.x-k8s.io/v1alpha1/Sandbox/"+tc.owner && c.OwnerUID == "owner-1" {
					return pipeline.Verdict{Reason: "owner-alive", FromOwner: true}
				}
				return pipeline.Verdict{Release: true, Reason: "owner-uid-rotated", FromOwner: true}
			}
			e, _, rep, vm := seedRow(t, env, "ns/u", store.Claim{PodUID: "uid-old", OwnerUID: "owner-1"},
				func(c *pipeline.Config) { c.Owners = owners })
			create(t, e, intent("ns/u", "uid-new", "owner-1"))
			if tc.adopt {
				if got := rep.running(t, "uid-new"); got.claim.ID != vm.ID {
					t.Fatalf("adopted %s, want %s", got.claim.ID, vm.ID)
				}
				return
			}
			// Not the recorded owner: the row's recorded owner is asked, and
			// the replacement does not get the VM.
			got := rep.running(t, "uid-new")
			if got.claim.ID == vm.ID {
				t.Fatal("an unverified owner adopted the unnamed row's VM")
			}
		})
	}
}

// replaying answers every claim with the first answer it got: a sandboxd,
// a proxy or a retry layer that replays a response.
type replaying struct {
	pipeline.Sandboxd
	mu    sync.Mutex
	first *pool.ClaimResponse
}

func (r *replaying) Claim(ctx context.Context, req pool.ClaimRequest) (pool.ClaimResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first != nil {
		return *r.first, nil
	}
	resp, err := r.Sandboxd.Claim(ctx, req)
	if err == nil {
		r.first = &resp
	}
	return resp, err
}

// A claim answer is accepted for one key only: an answer naming a VM that
// another key holds is refused, nothing is recorded for it, and the VM
// stays with the key that holds it.
func TestAReplayedClaimAnswerIsAcceptedForOneKeyOnly(t *testing.T) {
	env := newSim(t, sim.Config{})
	rep := newReporter()
	e := startEngine(t, testConfig(&replaying{Sandboxd: env.root}, openStore(t, tempStorePath(t), false), rep))
	<-e.Verified()
	create(t, e, intent("ns/a", "uid-a", ""))
	a := rep.running(t, "uid-a")
	create(t, e, intent("ns/b", "uid-b", ""))
	rep.pending(t, "uid-b", pipeline.ReasonClaimFailed, 2)
	if n := countOf(rep.snapshot(), "running", "uid-b", ""); n != 0 {
		t.Fatalf("a second Pod went Running on VM %s, which ns/a holds", a.claim.ID)
	}
	if _, ok := e.Lookup("ns/b"); ok {
		t.Fatal("a row was recorded for the replayed answer")
	}
	if v, ok := e.Lookup("ns/a"); !ok || v.ID != a.claim.ID || !alive(env, a.claim.ID) {
		t.Fatal("the VM's holder lost it")
	}
}

// A row is dropped only on proof that its VM is gone. Rows claimed under
// the root token are not in a tenant token's listing, and a sandboxd that
// is still restoring may answer a short listing: neither drops a row. A
// root read answering 404 does.
func TestAbsenceFromAListingDropsNoRow(t *testing.T) {
	seed := func(t *testing.T, env *simEnv) (string, pool.ClaimResponse) {
		vm, err := env.root.Claim(context.Background(), pool.ClaimRequest{Template: template, TTLSeconds: 3600, ClaimRef: "ns/r"})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Second)
		return previousStateFile(t, map[string]store.Claim{
			"ns/r":    {ID: vm.ID, Token: vm.Token, PodUID: "uid-r", ClaimedAt: now, Deadline: vm.Deadline},
			"ns/gone": {ID: "sb_00000000000000ff", Token: "00000000000000000000000000000000", PodUID: "uid-g", ClaimedAt: now, Deadline: now.Add(time.Hour)},
		}), vm
	}
	t.Run("tenant-token", func(t *testing.T) {
		env := newSim(t, sim.Config{})
		path, vm := seed(t, env)
		st := openStore(t, path, false)
		e := startEngine(t, testConfig(env.node, st, newReporter()))
		<-e.Verified()
		for _, key := range []string{"ns/r", "ns/gone"} {
			if v, ok := e.Lookup(pipeline.PodKey(key)); !ok || v.State != pipeline.StateQuarantined {
				t.Fatalf("%s: %v %v, want kept quarantined: the tenant's listing proves nothing", key, v.State, ok)
			}
		}
		if c, ok := st.Get("ns/r"); !ok || c.Token != vm.Token {
			t.Fatal("the release credential of a live VM was dropped")
		}
	})
	t.Run("short-listing", func(t *testing.T) {
		env := newSim(t, sim.Config{})
		path, vm := seed(t, env)
		st := openStore(t, path, false)
		e := startEngine(t, testConfig(emptyListing{env.root}, st, newReporter()))
		<-e.Verified()
		if v, ok := e.Lookup("ns/r"); !ok || v.State != pipeline.StateDurable || v.ID != vm.ID {
			t.Fatalf("ns/r: %+v %v, want lifted by the root read of its id", v, ok)
		}
		if _, ok := e.Lookup("ns/gone"); ok {
			t.Fatal("ns/gone kept, though a root read of its id answers 404")
		}
	})
}

// emptyListing answers every listing with no rows, as a sandboxd still
// restoring its index might.
type emptyListing struct{ pipeline.Sandboxd }

func (emptyListing) List(context.Context, pool.ListOptions) ([]pool.Sandbox, error) {
	return []pool.Sandbox{}, nil
}

// virtual-kubelet can replace a Pod generation without calling DeletePod
// (a delete and a same-name create synced as one update). A replacement of
// another owner waits; once it is deleted too, the old claim is held for
// no Pod at all, and must still be released when its recorded owner goes.
func TestAClaimReplacedWithoutADeleteIsReauthorized(t *testing.T) {
	var gone sync.Map // owner UID → true
	owners := func(_ context.Context, _ pipeline.PodKey, c pipeline.ClaimView) pipeline.Verdict {
		if _, ok := gone.Load(c.OwnerUID); ok {
			return pipeline.Verdict{Release: true, Reason: "owner-gone", FromOwner: true}
		}
		return pipeline.Verdict{Reason: "owner-alive", FromOwner: true}
	}
	r, clk := newLoopRig(t, sim.Config{}, func(c *pipeline.Config) { c.Owners = owners }, pipeline.LoopReauthorize)
	create(t, r.eng, intent("ns/p", "uid-old", "owner-1"))
	old := r.rep.running(t, "uid-old")
	create(t, r.eng, intent("ns/p", "uid-new", "owner-2")) // no Delete of uid-old
	r.rep.pending(t, "uid-new", pipeline.ReasonOwnerConflict, 1)
	if res, err := r.eng.Delete(context.Background(), pipeline.PodRef{Key: "ns/p", UID: "uid-new"}, verdict(true, "bare-pod")); err != nil || res.Held {
		t.Fatalf("the replacement's delete = %+v, %v; it holds nothing", res, err)
	}
	clk.pass(t, pipeline.LoopReauthorize)
	if !alive(r.env, old.claim.ID) {
		t.Fatal("released while its recorded owner lives")
	}
	gone.Store("owner-1", true)
	clk.pass(t, pipeline.LoopReauthorize)
	if alive(r.env, old.claim.ID) {
		t.Fatal("the replaced generation's VM is still held after its recorded owner went")
	}
}
