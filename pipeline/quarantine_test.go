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

// the claim states (docs/design.md) quarantine: rows loaded from disk are releasable but neither
// adoptable nor Running, and are never claimed over, until a sandboxd
// listing vouches for them. A failed listing decides nothing; a successful
// one lifts the listed rows and drops the rest, releasing nothing.
func TestQuarantineLiftedByListingAndDropsUnlisted(t *testing.T) {
	env := newSim(t, sim.Config{})
	real, err := env.root.Claim(context.Background(), pool.ClaimRequest{Template: template, ClaimRef: "ns/real", TTLSeconds: 3600})
	if err != nil {
		t.Fatalf("pre-claim: %v", err)
	}

	// The previous process's state file: one row sandboxd holds, one it
	// does not. Closed and reopened, as across a restart.
	now := time.Now().UTC().Truncate(time.Second)
	path := previousStateFile(t, map[string]store.Claim{
		"ns/real":  {ID: real.ID, Token: real.Token, Address: real.OwnerAddr, PodUID: "uid-old", OwnerUID: "owner-1", Owner: "agents.x-k8s.io/v1alpha1/Sandbox/owner-1", ClaimedAt: now, Deadline: real.Deadline},
		"ns/bogus": {ID: "sb_00000000bogus", Token: "tok-bogus-0000", Address: "10.77.9.9:7777", PodUID: "uid-bogus", ClaimedAt: now, Deadline: now.Add(time.Hour)},
	})
	st := openStore(t, path, true)

	env.sim.InjectFault(sim.Fault{Verb: pool.VerbList, Mode: "500"}) // listing down
	rep := newReporter()
	e, err := pipeline.New(testConfig(env.root, st, rep))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"ns/real", "ns/bogus"} {
		if cv, ok := e.Lookup(pipeline.PodKey(key)); !ok || cv.State != pipeline.StateQuarantined {
			t.Fatalf("Claim(%s) = %v %v at load, want quarantined", key, cv.State, ok)
		}
	}
	if _, q, _ := e.Counts(); q != 2 {
		t.Fatalf("quarantined = %d, want 2", q)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })

	// A replacement Pod (same owner) for the quarantined key must wait.
	create(t, e, intent("ns/real", "uid-new", "owner-1"))
	rep.pending(t, "uid-new", pipeline.ReasonQuarantined, 3)
	testkit.WaitFor(t, waitTimeout, "a few failed listings", func() bool { return env.count("list") >= 2 })
	if got := env.count("claim"); got != 1 {
		t.Fatalf("claim requests = %d, want 1 (the pre-claim): a quarantined key was claimed over", got)
	}
	if find(rep.snapshot(), "running", "", "") >= 0 {
		t.Fatal("Running for a quarantined row")
	}
	select {
	case <-e.Verified():
		t.Fatal("Verified while every listing failed")
	default:
	}
	if cv, _ := e.Lookup("ns/bogus"); cv.State != pipeline.StateQuarantined {
		t.Fatalf("a failed listing decided ns/bogus: %v", cv.State)
	}

	env.sim.ClearFaults()
	select {
	case <-e.Verified():
	case <-time.After(waitTimeout):
		t.Fatal("quarantine not lifted after the listing recovered")
	}
	run := rep.running(t, "uid-new")
	if !run.adopted || run.claim.ID != real.ID {
		t.Errorf("Running(adopted=%v, id=%s), want the lifted claim %s adopted", run.adopted, run.claim.ID, real.ID)
	}
	if cv, ok := e.Lookup("ns/real"); !ok || cv.State != pipeline.StateDurable || cv.PodUID != "uid-new" {
		t.Errorf("Claim(ns/real) = %+v %v, want durable bound to uid-new", cv, ok)
	}
	if _, ok := e.Lookup("ns/bogus"); ok {
		t.Error("the unlisted row was not dropped")
	}
	if _, ok := st.Get("ns/bogus"); ok {
		t.Error("the unlisted row is still in the store")
	}
	if got := env.count("release"); got != 0 {
		t.Errorf("release requests = %d, want 0: verification never releases", got)
	}
	if got := env.count("claim"); got != 1 {
		t.Errorf("claim requests = %d, want 1", got)
	}
}
