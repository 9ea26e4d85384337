package pipeline_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// A process killed between the sandboxd claim and the fsync leaves a VM that
// sandboxd holds under the Pod generation's claim_ref and no row holds. The
// next process must neither claim a second VM for that generation nor
// lose the first: its create recovers it, and an owner-authorized delete
// releases it. A delete without authority keeps it; the next generation
// never takes it (its claim_ref names its own UID) and claims its own.

// preClaim is the previous process's claim that never became durable: made
// by this node (its claim_ref and labels) for Pod generation uid of owner
// ownerUID.
func preClaim(t *testing.T, c *pool.Client, key, uid, ownerUID string) pool.ClaimResponse {
	t.Helper()
	r, err := c.Claim(context.Background(), pool.ClaimRequest{
		Template: template, ClaimRef: mustRef(testID, pipeline.PodKey(key), uid), TTLSeconds: 3600,
		Metadata: testID.Labels(pipeline.PodRef{Key: pipeline.PodKey(key), UID: uid, OwnerUID: ownerUID}),
	})
	if err != nil {
		t.Fatalf("pre-claim %s: %v", key, err)
	}
	return r
}

func TestUnheldVMIsRecoveredByTheNextCreate(t *testing.T) {
	env := newSim(t, sim.Config{})
	lost := preClaim(t, env.root, "ns/p", "uid-1", "owner-1")
	rep := newReporter()
	e := startEngine(t, testConfig(env.root, openStore(t, tempStorePath(t), false), rep))

	create(t, e, intent("ns/p", "uid-1", "owner-1"))
	run := rep.running(t, "uid-1")
	if run.claim.ID != lost.ID {
		t.Fatalf("Running with %s, want the unheld %s recovered", run.claim.ID, lost.ID)
	}
	if got := env.count("claim"); got != 1 {
		t.Errorf("claim requests = %d, want 1 (the pre-claim): a second VM was claimed", got)
	}
	if got := len(env.sandboxesFor("ns/p")); got != 1 {
		t.Errorf("sandboxes under ns/p = %d, want 1", got)
	}
}

func TestUnheldVMIsReleasedOnlyWithOwnerAuthority(t *testing.T) {
	env := newSim(t, sim.Config{})
	lost := preClaim(t, env.root, "ns/p", "uid-1", "owner-1")
	other := preClaim(t, env.root, "ns/q", "uid-q", "")
	rep := newReporter()
	e := startEngine(t, testConfig(env.root, openStore(t, tempStorePath(t), false), rep))
	ref := pipeline.PodRef{Key: "ns/p", UID: "uid-1", OwnerUID: "owner-1"}

	res, err := e.Delete(context.Background(), ref, verdict(false, "owner-alive"))
	if err != nil || !res.Held || res.Verdict.Release {
		t.Fatalf("preserve delete = %+v, %v; want held, preserved", res, err)
	}
	if got := env.count("release"); got != 0 {
		t.Fatalf("release requests = %d after a preserve verdict, want 0", got)
	}
	// The replacement Pod is another generation: it claims its own VM and
	// leaves the preserved one, made for uid-1, alone (the orphan scan
	// releases it once past the settle window: releaseUndelivered).
	create(t, e, intent("ns/p", "uid-2", "owner-1"))
	if run := rep.running(t, "uid-2"); run.claim.ID == lost.ID {
		t.Fatalf("replacement Running with %s, the previous generation's unheld VM", run.claim.ID)
	}
	if !alive(env, lost.ID) || env.count("release") != 0 {
		t.Fatalf("the preserved VM %s: alive %t, releases %d; want kept by the preserve verdict", lost.ID, alive(env, lost.ID), env.count("release"))
	}

	// The other lost claim: an authorized delete of its key releases it.
	res, err = e.Delete(context.Background(), pipeline.PodRef{Key: "ns/q", UID: "uid-q"}, verdict(true, "owner-gone"))
	if err != nil || !res.Held || !res.Verdict.Release {
		t.Fatalf("release delete = %+v, %v; want held, released", res, err)
	}
	if got := len(env.sandboxesFor("ns/q")); got != 0 {
		t.Errorf("sandbox %s still held after an authorized delete", other.ID)
	}
	if got := env.count("release"); got != 1 {
		t.Errorf("release requests = %d, want 1", got)
	}
}

// Without the root token the credential of an unheld VM cannot be fetched:
// the create does not claim over it (that would double the VM) and says why.
func TestUnheldVMWithoutRootTokenIsNeverClaimedOver(t *testing.T) {
	env := newSim(t, sim.Config{})
	// A tenant sees only its own claims: the previous process held the
	// same tenant token.
	preClaim(t, env.node, "ns/p", "uid-1", "")
	rep := newReporter()
	e := startEngine(t, testConfig(env.node, openStore(t, tempStorePath(t), false), rep))
	create(t, e, intent("ns/p", "uid-1", ""))
	rep.pending(t, "uid-1", pipeline.ReasonLostClaim, 1)
	if got := env.count("claim"); got != 1 {
		t.Errorf("claim requests = %d, want 1: an unrecoverable VM was claimed over", got)
	}
}

// failingLookup refuses every listing of one claim_ref while on.
type failingLookup struct {
	pipeline.Sandboxd
	ref string
	on  atomic.Bool
}

func (f *failingLookup) List(ctx context.Context, o pool.ListOptions) ([]pool.Sandbox, error) {
	if f.on.Load() && o.ClaimRef == f.ref {
		return nil, errors.New("listing refused")
	}
	return f.Sandboxd.List(ctx, o)
}

// A late delete of an earlier generation, with no row, looks up only that
// generation's claim_ref. While the key's live generation still owes the
// lookup of its own lost answer, that delete must not settle the key: the
// live generation's next attempt would claim a second VM instead of
// recovering the first.
func TestAnEarlierGenerationsDeleteNeverSettlesTheLiveGenerationsLostAnswer(t *testing.T) {
	env := newSim(t, sim.Config{})
	sbx := &failingLookup{Sandboxd: env.root, ref: mustRef(testID, "ns/p", "uid-b")}
	sbx.on.Store(true)
	rep := newReporter()
	e := startEngine(t, testConfig(sbx, openStore(t, tempStorePath(t), false), rep))
	<-e.Listed()

	// The live generation's answer is lost, and its lookup fails: it owes one.
	env.sim.InjectFault(sim.Fault{Verb: pool.VerbClaim, Mode: "lose-response", Count: 1})
	create(t, e, intent("ns/p", "uid-b", ""))
	rep.pending(t, "uid-b", pipeline.ReasonClaimFailed, 1)

	res, err := e.Delete(context.Background(), pipeline.PodRef{Key: "ns/p", UID: "uid-a"}, verdict(true, "bare-pod"))
	if err != nil || res.Held {
		t.Fatalf("the earlier generation's delete = %+v, %v; want nothing held", res, err)
	}
	sbx.on.Store(false)
	run := rep.running(t, "uid-b")
	if got := env.count("claim"); got != 1 {
		t.Errorf("claim requests = %d, want 1: the live generation claimed again instead of recovering its lost answer", got)
	}
	if live := env.sandboxesFor("ns/p"); len(live) != 1 || live[0].ID != run.claim.ID {
		t.Errorf("VMs for ns/p: %v, want only the recovered %s", live, run.claim.ID)
	}
}
