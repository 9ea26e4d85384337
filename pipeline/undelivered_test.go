package pipeline_test

import (
	"context"
	"fmt"
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
// undelivered one once it is older than the settle window, and never
// before, so the Pod ends with exactly one VM. On a server before V2 the
// by-id read carries no token (the VM is released by id with the root
// token), and rows carry no claimed_at: the age is counted from when the
// node first listed the VM.
func TestClaimFinishingAfterItsCallerLeftEndsWithOneVM(t *testing.T) {
	for _, v := range []string{sim.V1, sim.LatestAPI} {
		t.Run(v, func(t *testing.T) { claimsFinishingAfterTheirCallersLeft(t, v, 1) })
	}
}

// Ten such claims on V1, whose rows carry no claimed_at: ten Pods end with
// ten VMs, and none of the ten late VMs is left to its lease.
func TestTenClaimsFinishingLateOnV1EndWithTenVMs(t *testing.T) {
	claimsFinishingAfterTheirCallersLeft(t, sim.V1, 10)
}

func claimsFinishingAfterTheirCallersLeft(t *testing.T, api string, n int) {
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
	const settle = 3 * loopInterval
	cfg.SettleWindow = settle
	clk := driveLoops(&cfg, pipeline.LoopOrphanScan)
	e := startEngine(t, cfg)
	<-e.Listed()

	// The first claims are held at sandboxd until every Pod has been
	// delivered another VM: each 100ms attempt times out, the key's lookup
	// finds nothing (a VM exists only once its claim is done), and a retry
	// claims again. Only then do the abandoned claims finish.
	release := env.sim.HoldNextClaims(n)
	t.Cleanup(release)
	keys := make([]string, n)
	delivered := map[string]string{} // key → the VM its Pod runs
	for i := range keys {
		keys[i] = fmt.Sprintf("ns/late-%d", i)
		create(t, e, intent(keys[i], fmt.Sprintf("uid-late-%d", i), ""))
	}
	for i, key := range keys {
		delivered[key] = rep.running(t, fmt.Sprintf("uid-late-%d", i)).claim.ID
	}
	// The late VMs were not in the index when each key looked.
	for _, key := range keys {
		if live := env.sandboxesFor(key); len(live) != 1 || live[0].ID != delivered[key] {
			t.Fatalf("VMs for %s before the held claims finished: %v, want only the delivered %s", key, live, delivered[key])
		}
	}
	release()
	testkit.WaitFor(t, waitTimeout, "the abandoned claims to finish", func() bool {
		return env.count("claim_held") == int64(n) && ownedVMs(env) == 2*n && env.count("claim_ok") == env.count("claim")
	})

	// Younger than the settle window by its own measure: kept.
	clk.pass(t, pipeline.LoopOrphanScan)
	if got := ownedVMs(env); got != 2*n {
		t.Fatalf("%d VMs after the first scan, want all %d kept: the late ones are younger than the settle window", got, 2*n)
	}
	clk.passAt(t, pipeline.LoopOrphanScan, clk.Now().Add(settle))
	for _, key := range keys {
		if live := env.sandboxesFor(key); len(live) != 1 || live[0].ID != delivered[key] {
			t.Errorf("VMs for %s after the settle window: %v, want only the delivered %s", key, live, delivered[key])
		}
		if row, _ := e.Lookup(pipeline.PodKey(key)); row.ID != delivered[key] {
			t.Errorf("the row of %s holds %s, want %s", key, row.ID, delivered[key])
		}
	}
	rep.waitFor(t, fmt.Sprintf("%d undelivered release decisions", n), func(evs []event) bool {
		return countOf(evs, "decision", "", "release/undelivered") == n
	})
	if got := ownedVMs(env); got != n {
		t.Errorf("%d VMs for %d Pods after the settle window, want one each", got, n)
	}
}

// ownedVMs counts the live VMs this node made.
func ownedVMs(env *simEnv) int {
	n := 0
	for _, sb := range env.sim.Sandboxes() {
		if _, _, ok := testID.Owns(sb, false); ok {
			n++
		}
	}
	return n
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
	vm := preClaim(t, env.node, "ns/x", "uid-x", "")
	if _, err := env.node.Get(context.Background(), vm.ID); err == nil {
		t.Fatal("a tenant read a sandbox by id")
	}
	clk.pass(t, pipeline.LoopOrphanScan)
	if len(obs.verdicts) != 1 || obs.verdicts[0] != [3]int{1, 0, 0} || !alive(env, vm.ID) {
		t.Fatalf("verdicts %v alive %v: want the VM reported and kept", obs.verdicts, alive(env, vm.ID))
	}
}
