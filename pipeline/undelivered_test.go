package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// A claim whose caller gave up while sandboxd was still provisioning
// finishes anyway, and its VM shows up only then: after the key's lookup
// found nothing and the Pod got a second VM. The orphan scan releases the
// undelivered one, so the Pod ends with exactly one VM.
// On a server before V2 the by-id read carries no token: the undelivered
// VM is released by id with the root token.
func TestClaimFinishingAfterItsCallerLeftEndsWithOneVM(t *testing.T) {
	for _, v := range []string{sim.V1, sim.LatestAPI} {
		t.Run(v, func(t *testing.T) { claimFinishingAfterItsCallerLeft(t, v) })
	}
}

func claimFinishingAfterItsCallerLeft(t *testing.T, api string) {
	// A claim outlives its caller only behind a proxy that hides the
	// disconnect: real sandboxd cancels it otherwise, and this test is
	// about the VM that is made anyway.
	env := newSim(t, sim.Config{FinishDetachedClaims: true, APIVersion: api})
	slowClaims, err := pool.NewClient(pool.ClientOptions{BaseURL: env.url, Token: rootToken, Retry: fastRetry, ClaimTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slowClaims.CloseIdleConnections)
	rep := newReporter()
	cfg := testConfig(slowClaims, openStore(t, tempStorePath(t), false), rep)
	cfg.SettleWindow = time.Nanosecond
	clk := driveLoops(&cfg, pipeline.LoopOrphanScan)
	e := startEngine(t, cfg)
	<-e.Listed()

	// The first claim is held at sandboxd until the Pod has been delivered
	// another VM: its 100ms attempt times out, the key's lookup finds
	// nothing (a VM exists only once its claim is done), and a retry
	// claims again. Only then does the abandoned claim finish.
	release := env.sim.HoldNextClaim()
	t.Cleanup(release)
	create(t, e, intent("ns/late", "uid-late", ""))
	run := rep.running(t, "uid-late")
	release()
	testkit.WaitFor(t, waitTimeout, "the abandoned claim to finish", func() bool {
		return len(env.sandboxesFor("ns/late")) >= 2 && env.count("claim_ok") == env.count("claim")
	})

	clk.pass(t, pipeline.LoopOrphanScan)
	live := env.sandboxesFor("ns/late")
	if len(live) != 1 || live[0].ID != run.claim.ID {
		t.Fatalf("VMs for ns/late after the scan: %v, want only the delivered %s", live, run.claim.ID)
	}
	rep.waitFor(t, "the undelivered release decision", func(evs []event) bool {
		return find(evs, "decision", "", "release/undelivered") >= 0
	})
	if row, _ := e.Lookup("ns/late"); row.ID != run.claim.ID {
		t.Errorf("the row holds %s, want %s", row.ID, run.claim.ID)
	}
}

// Without the root token an undelivered VM's credential cannot be fetched:
// it is reported, never released, and nothing is asked in a loop.
func TestUndeliveredVMWithTenantTokenIsOnlyReported(t *testing.T) {
	env := newSim(t, sim.Config{})
	rep := newReporter()
	cfg := testConfig(env.node, openStore(t, tempStorePath(t), false), rep)
	cfg.SettleWindow = time.Nanosecond
	obs := &orphanObs{}
	cfg.OrphanObserver = obs
	clk := driveLoops(&cfg, pipeline.LoopOrphanScan)
	startEngine(t, cfg)
	vm := preClaim(t, env.node, "ns/x", "")
	if _, err := env.node.Get(context.Background(), vm.ID); err == nil {
		t.Fatal("a tenant read a sandbox by id")
	}
	clk.pass(t, pipeline.LoopOrphanScan)
	if len(obs.verdicts) != 1 || obs.verdicts[0] != [2]int{1, 0} || !alive(env, vm.ID) {
		t.Fatalf("verdicts %v alive %v: want the VM reported and kept", obs.verdicts, alive(env, vm.ID))
	}
}
