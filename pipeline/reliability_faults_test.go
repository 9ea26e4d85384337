package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// TestR3SandboxdTransientFaults: one fault (or a short burst) that the
// in-transaction retry absorbs. The Pod ends Running without a Pending
// detour, sandboxd saw exactly the expected claim attempts, a lost or
// broken answer never doubles the VM, and nothing leaks.
func TestR3SandboxdTransientFaults(t *testing.T) {
	slow := 10 * time.Second
	cases := []struct {
		name   string
		fault  sim.Fault
		claims int64 // claim attempts at the engine's client
	}{
		{"500", sim.Fault{Mode: "500", Count: 2}, 3},
		{"503-retry-after", sim.Fault{Mode: "503", Count: 1, RetryAfter: time.Second}, 2},
		{"garbage", sim.Fault{Mode: "garbage", Count: 1}, 2},
		{"reset", sim.Fault{Mode: "reset", Count: 1}, 2},
		{"missing-id", sim.Fault{Mode: "missing-id", Count: 1}, 2},
		// The VM is made and its answer lost: recovered by claim_ref, never
		// claimed again.
		{"lose-response", sim.Fault{Mode: "lose-response", Count: 1}, 1},
		// A slow sandboxd is waited for, not abandoned and re-claimed.
		{"slow-10s", sim.Fault{Mode: "slow", Count: 1, Delay: slow}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			r := newR3Rig(t)
			tc.fault.Verb = pool.VerbClaim
			r.inject(tc.fault)
			it := intent("r3/"+tc.name, "uid-"+tc.name, "owner-"+tc.name)
			create(t, r.eng, it)
			if tc.fault.Mode == "slow" {
				// Duplicate events while the slow claim is in flight.
				testkit.WaitFor(t, waitTimeout, "the slow claim to be in flight", func() bool { return r.cs.claims.Load() == 1 })
				create(t, r.eng, it)
				create(t, r.eng, it)
			}
			r.settle(t, it)
			if got := r.cs.claims.Load(); got != tc.claims {
				t.Errorf("claim attempts = %d, want %d", got, tc.claims)
			}
			if got := r.env.sim.Counters()["claim"]; got != tc.claims {
				t.Errorf("claims at sandboxd = %d, want %d", got, tc.claims)
			}
			if got := r.env.sim.Counters()["claim_ok"]; got != 1 {
				t.Errorf("VMs claimed at sandboxd = %d, want 1", got)
			}
			if n := countOf(r.rep.snapshot(), "pending", it.Ref.UID, ""); n != 0 {
				t.Errorf("a fault absorbed inside the transaction surfaced %d Pending reports", n)
			}
			if tc.fault.Mode == "503" {
				// Retry-After is honoured: the retry waited at least 1 s.
				ts := r.cs.times()
				if len(ts) != 2 || ts[1].Sub(ts[0]) < time.Second {
					t.Errorf("claim times %v: the retry did not wait for Retry-After (1s)", ts)
				}
			}
		})
	}
}

// TestR3SandboxdDown: sandboxd is down (connection refused) when the Pod
// arrives. The Pod is Pending with SandboxClaimFailed naming the Pod and
// the cause, retried with bounded attempts per transaction, and Running
// with exactly one VM once sandboxd is back.
//
// While sandboxd is down, every claim_ref lookup fails, and a failed
// lookup must never fall through to a claim: the VM it was looking for may
// exist. Whether a lookup is owed at the first attempt depends on the
// startup listing, so each case fixes it:
//   - before-startup-listing: sandboxd is down before the engine starts, so
//     the startup listing never succeeds, every attempt owes a lookup, and
//     not one claim is sent until sandboxd is back;
//   - after-startup-listing: the first attempt claims without a lookup (the
//     listing showed no VM), its refused connection may have made one, and
//     from then on every attempt owes the lookup that keeps failing: at
//     most that one claim is sent until sandboxd is back.
func TestR3SandboxdDown(t *testing.T) {
	for _, tc := range []struct {
		name      string
		early     bool  // down before the engine starts
		maxClaims int64 // claim attempts while sandboxd is down
	}{
		{"before-startup-listing", true, 0},
		{"after-startup-listing", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			r := newR3Env(t)
			if tc.early {
				r.inject(sim.Fault{Mode: "down"})
				r.start(t)
			} else {
				r.start(t)
				r.listed(t)
				r.inject(sim.Fault{Mode: "down"})
			}
			it := intent("r3/down", "uid-down", "owner-down")
			create(t, r.eng, it)
			ev := r.rep.pending(t, it.Ref.UID, pipeline.ReasonClaimFailed, 3)
			if !strings.Contains(ev.msg, string(it.Ref.Key)) || !strings.Contains(ev.msg, "connect") {
				t.Errorf("Pending message %q does not name the pod and the refused connection", ev.msg)
			}
			checkBounded(t, r, it, r3Attempts)
			if got := r.cs.claims.Load(); got > tc.maxClaims {
				t.Errorf("%d claim attempts while sandboxd was down, want at most %d: a failed claim_ref lookup fell through to a claim", got, tc.maxClaims)
			}
			if !r.cs.lookupFailed(mustRef(testID, it.Ref.Key, it.Ref.UID)) {
				t.Error("no claim_ref lookup was tried while sandboxd was down: the case tested nothing")
			}
			r.noBlindClaims(t)
			before := r.cs.claims.Load()
			r.clear(t, "down")
			r.settle(t, it)
			if got := r.cs.claims.Load() - before; got != 1 {
				t.Errorf("%d claims once sandboxd was back, want 1", got)
			}
			if got := r.env.sim.Counters()["claim"]; got != 1 {
				t.Errorf("claims at sandboxd = %d, want 1 (only after it came back)", got)
			}
		})
	}
}

// TestR3LookupFailureNeverFallsThroughToAClaim: a claim_ref lookup is owed
// after a claim attempt whose answer may have been lost, and before the
// startup listing has succeeded. While that lookup fails, at its listing
// or at the Get that fetches a listed VM's credential, the engine must not
// claim: the VM it is looking for may exist, and a claim would double it.
// Claim attempts are counted at the engine's client (countingSandboxd) and
// VMs at the emulator. Once the lookup works, the lost VM is recovered,
// never claimed again, and the Pod runs on it.
func TestR3LookupFailureNeverFallsThroughToAClaim(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lost: the first claim makes a VM and loses its answer (the engine
		// has listed at startup first); otherwise the fault is in place
		// before the engine starts and no claim is made until it clears.
		lost  bool
		fault sim.Fault
	}{
		{"list-fails-after-lost-response", true, sim.Fault{Verb: pool.VerbList, Mode: "500"}},
		{"get-fails-after-lost-response", true, sim.Fault{Verb: pool.VerbGet, Mode: "500"}},
		{"list-fails-before-startup-listing", false, sim.Fault{Verb: pool.VerbList, Mode: "500"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			r := newR3Env(t)
			var wantClaims int64 // claim attempts while the lookup fails
			if tc.lost {
				r.start(t)
				r.listed(t)
				r.inject(sim.Fault{Verb: pool.VerbClaim, Mode: "lose-response", Count: 1})
				r.inject(tc.fault)
				wantClaims = 1
			} else {
				r.inject(tc.fault)
				r.start(t)
			}
			it := intent("r3/"+tc.name, "uid-"+tc.name, "owner-"+tc.name)
			create(t, r.eng, it)
			// Two finished transactions: the lookup failed across a requeue
			// too, not only inside one transaction's retries. A Running Pod
			// ends the wait as well: it can only come from a claim.
			r.rep.waitFor(t, "2× Pending "+pipeline.ReasonClaimFailed+", or Running", func(evs []event) bool {
				return countOf(evs, "pending", it.Ref.UID, pipeline.ReasonClaimFailed) >= 2 || find(evs, "running", it.Ref.UID, "") >= 0
			})
			if got := r.cs.claims.Load(); got != wantClaims {
				t.Errorf("%d claim attempts while the lookup fails, want %d: a failed lookup fell through to a claim", got, wantClaims)
			}
			if got := r.env.sim.Counters()["claim_ok"]; got != wantClaims {
				t.Errorf("%d VMs made at sandboxd while the lookup fails, want %d", got, wantClaims)
			}
			if !r.cs.lookupFailed(mustRef(testID, it.Ref.Key, it.Ref.UID)) {
				t.Error("no claim_ref lookup failed: the case tested nothing")
			}
			if tc.fault.Verb == pool.VerbGet && r.cs.gets.Load() == 0 {
				t.Error("the lookup never reached the credential fetch: the case tested nothing")
			}
			r.noBlindClaims(t)
			if find(r.rep.snapshot(), "running", it.Ref.UID, "") >= 0 {
				t.Fatal("Running while the lookup fails")
			}
			var lostID string
			if tc.lost {
				if live := liveFor(r.env.sim, it.Ref.Key); len(live) == 1 {
					lostID = live[0].ID
				} else {
					t.Fatalf("%d VMs for %s after the lost answer, want 1", len(live), it.Ref.Key)
				}
			}
			r.env.sim.ClearFaults()
			r.settle(t, it)
			if got := r.cs.claims.Load(); got != 1 {
				t.Errorf("%d claim attempts in all, want 1", got)
			}
			if run := r.rep.running(t, it.Ref.UID); tc.lost && run.claim.ID != lostID {
				t.Errorf("Running on %s, want the recovered %s", run.claim.ID, lostID)
			}
		})
	}
}

// TestR3SandboxdPersistentFaults: a fault that outlasts every in-transaction
// retry. The Pod stays Pending with the documented reason (never Running,
// never a VM), each transaction's attempts are bounded (4xx and capacity
// misses are tried once), and once the fault clears the Pod is Running
// with exactly one VM.
func TestR3SandboxdPersistentFaults(t *testing.T) {
	cases := []struct {
		name, mode string
		retryAfter time.Duration
		reason     string
		perTx      int64 // claim attempts a transaction may make
	}{
		{"500", "500", 0, pipeline.ReasonClaimFailed, r3Attempts},
		{"503-retry-after", "503", time.Second, pipeline.ReasonClaimFailed, r3Attempts},
		{"garbage", "garbage", 0, pipeline.ReasonClaimFailed, r3Attempts},
		{"reset", "reset", 0, pipeline.ReasonClaimFailed, r3Attempts},
		{"missing-id", "missing-id", 0, pipeline.ReasonClaimFailed, r3Attempts},
		{"409", "409", 0, pipeline.ReasonClaimFailed, 1},
		{"429", "429", time.Second, pipeline.ReasonCapacity, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			r := newR3Rig(t)
			r.inject(sim.Fault{Verb: pool.VerbClaim, Mode: tc.mode, RetryAfter: tc.retryAfter})
			it := intent("r3/"+tc.name, "uid-"+tc.name, "owner-"+tc.name)
			create(t, r.eng, it)
			n := 3
			if tc.retryAfter > 0 && tc.perTx > 1 {
				n = 1 // each transaction waits out Retry-After three times
			}
			ev := r.rep.pending(t, it.Ref.UID, tc.reason, n)
			if !strings.Contains(ev.msg, string(it.Ref.Key)) {
				t.Errorf("Pending message %q does not name the pod", ev.msg)
			}
			if tc.reason == pipeline.ReasonCapacity && !strings.Contains(ev.msg, template) {
				t.Errorf("Pending message %q does not name the template", ev.msg)
			}
			checkBounded(t, r, it, tc.perTx)
			if sent, at := r.cs.claims.Load(), r.env.sim.Counters()["claim"]; at > sent {
				t.Errorf("sandboxd saw %d claims, the engine sent %d: a claim was retried below the engine", at, sent)
			}
			r.clear(t, tc.mode)
			r.settle(t, it)
		})
	}
}

// TestR3CapacityStorm: a 429 storm over many Pods. Every Pod stays Pending
// with SandboxCapacityMiss, a capacity miss is never retried inside a
// transaction (one claim per transaction: the node is not hammered), and
// when capacity returns every Pod is Running with exactly one VM.
func TestR3CapacityStorm(t *testing.T) {
	noLeaks(t)
	pods := 20
	if full() {
		pods = 200
	}
	// Every Pod holds a queue slot while Pending: room for all of them, or
	// Create blocks (backpressure) for the rest of the storm.
	r := newR3Rig(t, func(c *pipeline.Config) { c.QueueDepth = pods })
	r.inject(sim.Fault{Verb: pool.VerbClaim, Mode: "429", RetryAfter: time.Second})
	var its []pipeline.Intent
	for i := range pods {
		it := intent(fmt.Sprintf("r3/storm-%d", i), fmt.Sprintf("uid-storm-%d", i), "owner-storm")
		its = append(its, it)
		create(t, r.eng, it)
	}
	for _, it := range its {
		r.rep.pending(t, it.Ref.UID, pipeline.ReasonCapacity, 2)
	}
	evs := r.rep.snapshot()
	claims, tx := r.cs.claims.Load(), int64(countOf(evs, "outcome", "", ""))
	const inFlight = 2 * 4 // shards × workers of testConfig
	if claims > tx+inFlight {
		t.Fatalf("%d claims over %d transactions: a capacity miss was retried inside a transaction", claims, tx)
	}
	if find(evs, "running", "", "") >= 0 || len(r.env.sim.Sandboxes()) != 0 {
		t.Fatal("a Pod went Running, or a VM exists, during the 429 storm")
	}
	r.clear(t, "429")
	for _, it := range its {
		run := r.rep.running(t, it.Ref.UID)
		if live := liveFor(r.env.sim, it.Ref.Key); len(live) != 1 || live[0].ID != run.claim.ID {
			t.Fatalf("%s: live VMs %v, want exactly the Running claim %s", it.Ref.Key, live, run.claim.ID)
		}
	}
	if n := len(r.env.sim.Sandboxes()); n != pods {
		t.Fatalf("%d VMs for %d Pods", n, pods)
	}
	r.noBlindClaims(t)
	for _, it := range its {
		if res, err := r.eng.Delete(context.Background(), it.Ref, verdict(true, "owner-gone")); err != nil || !res.Held {
			t.Fatalf("%s: Delete = %+v, %v", it.Ref.Key, res, err)
		}
	}
	if n := len(r.env.sim.Sandboxes()); n != 0 {
		t.Fatalf("%d VMs live after releasing every Pod", n)
	}
}
