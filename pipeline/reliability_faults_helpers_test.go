package pipeline_test

import (
	"context"
	"testing"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// r3Attempts is the in-transaction claim retry bound of the R3 engine.
const r3Attempts = 4

// r3Rig is one engine, with a counting sandboxd client, over an emulator
// that can also be taken down and brought back.
type r3Rig struct {
	env *simEnv
	cs  *countingSandboxd
	rep *reporter
	eng *pipeline.Engine
}

func newR3Rig(t *testing.T, mod ...func(*pipeline.Config)) *r3Rig {
	t.Helper()
	r := newR3Env(t)
	r.start(t, mod...)
	return r
}

// newR3Env is the rig without its engine, so that a fault can be in place
// before the engine's startup listing runs; start starts the engine.
func newR3Env(t *testing.T) *r3Rig {
	t.Helper()
	env := newSim(t, sim.Config{})
	return &r3Rig{env: env, cs: &countingSandboxd{Sandboxd: env.root}, rep: newReporter()}
}

func (r *r3Rig) start(t *testing.T, mod ...func(*pipeline.Config)) {
	t.Helper()
	cfg := testConfig(r.cs, openStore(t, tempStorePath(t), false), r.rep)
	cfg.ClaimRetry.MaxAttempts = r3Attempts
	cfg.Owners = allOwnersGone // every delete of this suite is authorized
	for _, m := range mod {
		m(&cfg)
	}
	r.eng = startEngine(t, cfg)
}

// listed waits for the engine's startup listing: from then on a claim
// looks its claim_ref up only once an attempt may have made a VM.
func (r *r3Rig) listed(t *testing.T) {
	t.Helper()
	testkit.WaitFor(t, waitTimeout, "the startup listing", func() bool {
		select {
		case <-r.eng.Listed():
			return true
		default:
			return false
		}
	})
}

// noBlindClaims: no claim was sent while its claim_ref was owed a lookup
// (see countingSandboxd), i.e. a failed lookup never fell through to a
// claim.
func (r *r3Rig) noBlindClaims(t *testing.T) {
	t.Helper()
	if b := r.cs.blindClaims(); len(b) > 0 {
		t.Errorf("%d claims sent without a successful claim_ref lookup; the first: %s", len(b), b[0])
	}
}

// inject applies a fault mode; "down" closes the emulator's listener.
func (r *r3Rig) inject(f sim.Fault) {
	if f.Mode == "down" {
		r.env.emu.Down()
		return
	}
	r.env.sim.InjectFault(f)
}

func (r *r3Rig) clear(t *testing.T, mode string) {
	if mode == "down" {
		r.env.emu.Up(t)
		return
	}
	r.env.sim.ClearFaults()
}

// settle checks the end state every R3 case must reach: the Pod is Running
// with exactly one live VM under its claim_ref (the one it reports, so no
// duplicate from a lost response), and an owner-gone delete releases it.
func (r *r3Rig) settle(t *testing.T, it pipeline.Intent) {
	t.Helper()
	run := r.rep.running(t, it.Ref.UID)
	live := liveFor(r.env.sim, it.Ref.Key)
	if len(live) != 1 || live[0].ID != run.claim.ID {
		t.Fatalf("%s: live VMs %v, want exactly the Running claim %s", it.Ref.Key, live, run.claim.ID)
	}
	// A duplicate event may re-push Running; it must carry the same claim.
	for _, ev := range r.rep.snapshot() {
		if matches(ev, "running", it.Ref.UID, "") && ev.claim.ID != run.claim.ID {
			t.Errorf("%s: Running reported claims %s and %s", it.Ref.Key, run.claim.ID, ev.claim.ID)
		}
	}
	r.noBlindClaims(t)
	res, err := r.eng.Delete(context.Background(), it.Ref, verdict(true, "owner-gone"))
	if err != nil || !res.Held {
		t.Fatalf("%s: Delete = %+v, %v", it.Ref.Key, res, err)
	}
	if n := len(r.env.sim.Sandboxes()); n != 0 {
		t.Fatalf("%s: %d VMs live after the release, want 0", it.Ref.Key, n)
	}
}

// checkBounded: while the fault lasts there is no Running and no VM, and
// the claim attempts are at most perTx per finished transaction, plus one
// transaction that may be in flight.
func checkBounded(t *testing.T, r *r3Rig, it pipeline.Intent, perTx int64) {
	t.Helper()
	evs := r.rep.snapshot()
	claims := r.cs.claims.Load()
	tx := int64(countOf(evs, "outcome", "", ""))
	if find(evs, "running", it.Ref.UID, "") >= 0 {
		t.Fatalf("%s: Running while sandboxd is failing", it.Ref.Key)
	}
	if n := len(r.env.sim.Sandboxes()); n != 0 {
		t.Fatalf("%s: %d VMs exist while every claim failed", it.Ref.Key, n)
	}
	if tx == 0 || claims > perTx*(tx+1) {
		t.Fatalf("%s: %d claim attempts over %d transactions, want at most %d per transaction", it.Ref.Key, claims, tx, perTx)
	}
	t.Logf("%s: %d claim attempts, %d lists over %d transactions", it.Ref.Key, claims, r.cs.lists.Load(), tx)
}
