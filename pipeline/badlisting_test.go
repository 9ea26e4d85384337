package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// A 2xx listing without its sandboxes array ("200 {}") is a bad answer,
// never an empty node: quarantine verification drops no reloaded row on
// it, and the lease watch fails no Pod.
func TestListingWithoutSandboxesArrayDropsNoRowAndFailsNoPod(t *testing.T) {
	env := newSim(t, sim.Config{})
	vm, err := env.root.Claim(context.Background(), pool.ClaimRequest{Template: template, TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	path := previousStateFile(t, map[string]store.Claim{"ns/kept": {ID: vm.ID, Token: vm.Token, PodUID: "uid-kept", ClaimedAt: now, Deadline: vm.Deadline}})
	st := openStore(t, path, false)
	env.sim.InjectFault(sim.Fault{Verb: pool.VerbList, Mode: "missing-id"}) // every listing: 200 {}
	rep := newReporter()
	cfg := testConfig(env.root, st, rep)
	clk := driveLoops(&cfg, pipeline.LoopLeaseWatch)
	e := startEngine(t, cfg)

	testkit.WaitFor(t, waitTimeout, "a few failed verification rounds", func() bool { return env.count("list") >= 3 })
	if cv, ok := e.Lookup("ns/kept"); !ok || cv.State != pipeline.StateQuarantined {
		t.Fatalf("after 200 {} listings the row is %v (held %v), want still quarantined", cv.State, ok)
	}
	clk.passAt(t, pipeline.LoopLeaseWatch, vm.Deadline.Add(time.Hour))
	if n := countOf(rep.snapshot(), "expired", "", ""); n != 0 {
		t.Fatalf("%d Pods failed on a listing without its array", n)
	}
	if _, ok := st.Get("ns/kept"); !ok {
		t.Fatal("the release credential was dropped")
	}
}

// A row past its deadline that the node still lists with the same deadline
// (it has not reaped it yet) is looked at again only after a backoff, not
// on every tick.
func TestLeaseWatchBacksOffWhileTheNodeHasNotReaped(t *testing.T) {
	r, clk := newLoopRig(t, sim.Config{}, nil, pipeline.LoopLeaseWatch)
	create(t, r.eng, intent("ns/late", "uid-late", ""))
	run := r.rep.running(t, "uid-late")
	// Past the deadline (the VM is still listed), half a second before a
	// tick: the next tick comes within the backoff's shortest first step
	// (half an interval). Whether a key is ready only grows with time, so
	// no listing then means none at any instant before.
	now := clk.beforeTick(run.claim.Deadline.Add(time.Second), 500*time.Millisecond)
	lists := r.env.count("list")
	clk.passAt(t, pipeline.LoopLeaseWatch, now)
	if got := r.env.count("list"); got != lists+1 {
		t.Fatalf("lists %d → %d, want one listing for the due row", lists, got)
	}
	clk.passAt(t, pipeline.LoopLeaseWatch, now.Add(500*time.Millisecond))
	if got := r.env.count("list"); got != lists+1 {
		t.Errorf("lists %d → %d on the next tick, within the backoff, want no more", lists+1, got)
	}
	if _, ok := r.store.Get("ns/late"); !ok {
		t.Error("a row still listed was dropped")
	}
}
