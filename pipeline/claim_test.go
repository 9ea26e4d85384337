package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// Durable before Running (Engine.publishRunning): Running is pushed only once the claim is durable. The
// Reporter looks at the store (and at the bytes of the fsynced state file)
// from inside Running.
func TestCreateGoesRunningOnlyAfterDurableCommit(t *testing.T) {
	env := newSim(t, sim.Config{})
	path := tempStorePath(t)
	st := openStore(t, path, true) // fsync on: Put returning means on disk
	rep := newReporter()
	var (
		mu       sync.Mutex
		problems []string
	)
	rep.onRunning = func(ref pipeline.PodRef, c pipeline.ClaimView) {
		mu.Lock()
		defer mu.Unlock()
		row, ok := st.Get(string(ref.Key))
		switch {
		case !ok:
			problems = append(problems, string(ref.Key)+": Running before the row is in the store")
		case row.ID != c.ID || row.Token == "" || row.PodUID != ref.UID:
			problems = append(problems, fmt.Sprintf("%s: store holds %s/%s, Running reports %s/%s", ref.Key, row.ID, row.PodUID, c.ID, ref.UID))
		}
		data, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(data), `"id":"`+c.ID+`"`) {
			problems = append(problems, string(ref.Key)+": Running before the state file holds the claim")
		}
	}
	e := startEngine(t, testConfig(env.root, st, rep))

	const n = 8
	for i := range n {
		create(t, e, intent(fmt.Sprintf("ns/pod-%d", i), fmt.Sprintf("uid-%d", i), ""))
	}
	for i := range n {
		ev := rep.running(t, fmt.Sprintf("uid-%d", i))
		if ev.adopted {
			t.Errorf("%s: fresh claim reported as adopted", ev.ref.Key)
		}
		if ev.claim.Address == "" || ev.claim.ID == "" {
			t.Errorf("%s: Running claim lacks address or id", ev.ref.Key)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	if got := env.count("claim_ok"); got != n {
		t.Errorf("claim_ok = %d, want %d", got, n)
	}
}

// the ordering guarantee (the shard type): sharding by UID plus the shard's intent replacement collapse duplicate events;
// a storm of Create calls for one Pod makes one sandboxd claim.
func TestDuplicateEventsMakeOneClaim(t *testing.T) {
	// Some latency so that most duplicates land while the claim is in flight.
	r := newRig(t, sim.Config{ClaimLatency: 20 * time.Millisecond}, nil)
	it := intent("ns/dup", "uid-dup", "owner-1")

	const events = 1000
	var wg sync.WaitGroup
	errs := make(chan error, events)
	start := make(chan struct{})
	for range events {
		wg.Go(func() {
			<-start
			if err := r.eng.Create(context.Background(), it); err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Create: %v", err)
	}
	ev := r.rep.running(t, "uid-dup")
	// Let every queued duplicate drain: depth 0 means all intents are served.
	testkit.WaitFor(t, waitTimeout, "queues to drain", func() bool {
		for _, d := range r.eng.QueueDepths() {
			if d != 0 {
				return false
			}
		}
		return true
	})
	if got := r.env.count("claim"); got != 1 {
		t.Errorf("claim requests = %d, want exactly 1", got)
	}
	if got := len(r.env.sandboxesFor("ns/dup")); got != 1 {
		t.Errorf("sandboxes for ns/dup = %d, want 1", got)
	}
	for _, ev2 := range r.rep.snapshot() {
		if ev2.kind == "running" && ev2.claim.ID != ev.claim.ID {
			t.Errorf("Running reported two claims: %s and %s", ev.claim.ID, ev2.claim.ID)
		}
	}
}

// the sandboxd protocol (docs/architecture.md): a capacity miss is not retried inside the transaction; the Pod
// stays Pending with the capacity reason and is retried slowly until the
// node has room. Both capacity shapes (429, 200+redirect) count.
func TestCapacityMissStaysPendingAndRetries(t *testing.T) {
	for _, mode := range []string{sim.Capacity429, sim.CapacityRedirect} {
		t.Run("capacity="+mode, func(t *testing.T) {
			r := newRig(t, sim.Config{MaxClaims: 1, Capacity: mode}, nil)
			blocker, err := r.env.root.Claim(context.Background(), pool.ClaimRequest{Template: template, ClaimRef: "other/blocker"})
			if err != nil {
				t.Fatalf("pre-claim: %v", err)
			}
			create(t, r.eng, intent("ns/full", "uid-full", ""))

			ev := r.rep.pending(t, "uid-full", pipeline.ReasonCapacity, 3) // retried, still Pending
			if !strings.Contains(ev.msg, template) {
				t.Errorf("capacity message %q does not name the template", ev.msg)
			}
			if find(r.rep.snapshot(), "running", "uid-full", "") >= 0 {
				t.Fatal("Running while the node is full")
			}
			if got := r.env.count("claim_ok"); got != 1 {
				t.Fatalf("claim_ok = %d while full, want 1 (the blocker)", got)
			}

			if err := r.env.root.Release(context.Background(), blocker.ID, blocker.Token); err != nil {
				t.Fatalf("release blocker: %v", err)
			}
			run := r.rep.running(t, "uid-full")
			if got := r.env.sandboxesFor("ns/full"); len(got) != 1 || got[0].ID != run.claim.ID {
				t.Errorf("sandboxes for ns/full = %v, want exactly the Running claim %s", got, run.claim.ID)
			}
		})
	}
}

// the sandboxd protocol (docs/architecture.md) retries: a 5xx is retried with backoff inside the transaction
// (a lost answer is looked up first), bounded in attempts; once exhausted,
// the Pod is Pending with SandboxClaimFailed.
func TestTransientErrorsRetriedBounded(t *testing.T) {
	t.Run("500-once-then-success", func(t *testing.T) {
		r := newRig(t, sim.Config{}, nil)
		r.env.sim.InjectFault(sim.Fault{Verb: pool.VerbClaim, Mode: "500", Count: 1})
		create(t, r.eng, intent("ns/flaky", "uid-flaky", ""))
		run := r.rep.running(t, "uid-flaky")
		if got := r.env.sandboxesFor("ns/flaky"); len(got) != 1 || got[0].ID != run.claim.ID {
			t.Errorf("sandboxes for ns/flaky = %v, want 1 (the Running claim %s)", got, run.claim.ID)
		}
		if got := r.env.count("claim"); got != 2 {
			t.Errorf("claim requests = %d, want 2 (one 500, one success)", got)
		}
		if n := countOf(r.rep.snapshot(), "pending", "uid-flaky", ""); n != 0 {
			t.Errorf("a retried-in-transaction 500 surfaced %d Pending reports", n)
		}
	})

	t.Run("permanent-500-bounded", func(t *testing.T) {
		const attempts = 3
		r := newRig(t, sim.Config{}, func(c *pipeline.Config) {
			c.ClaimRetry.MaxAttempts = attempts
			// One transaction only: the slow requeue is far away.
			c.RequeueMin, c.RequeueMax = time.Hour, time.Hour
		})
		r.env.sim.InjectFault(sim.Fault{Verb: pool.VerbClaim, Mode: "500"})
		create(t, r.eng, intent("ns/broken", "uid-broken", ""))
		ev := r.rep.pending(t, "uid-broken", pipeline.ReasonClaimFailed, 1)
		r.rep.outcome(t, pipeline.OutcomeError, 1)
		if !strings.Contains(ev.msg, "ns/broken") {
			t.Errorf("failure message %q does not name the pod key", ev.msg)
		}
		if strings.Contains(ev.msg, rootToken) {
			t.Errorf("failure message leaks the token: %q", ev.msg)
		}
		if got := r.env.count("claim"); got != attempts {
			t.Errorf("claim requests = %d, want exactly MaxAttempts=%d", got, attempts)
		}
		if got := len(r.env.sim.Sandboxes()); got != 0 {
			t.Errorf("live sandboxes = %d, want 0", got)
		}
		if _, ok := r.eng.Lookup("ns/broken"); ok {
			t.Error("a failed claim left a row")
		}
	})
}

// the sandboxd protocol (docs/architecture.md): a claim is not idempotent. When its response is lost, the
// retry finds the VM by claim_ref and recovers its credential with the root
// token instead of claiming a second VM.
func TestLostClaimResponseIsRecoveredNotDoubled(t *testing.T) {
	r := newRig(t, sim.Config{}, nil)
	// A first claim teaches the engine the node-wide owner_addr.
	create(t, r.eng, intent("ns/first", "uid-first", ""))
	r.rep.running(t, "uid-first")
	r.env.sim.InjectFault(sim.Fault{Verb: pool.VerbClaim, Mode: "lose-response", Count: 1})
	create(t, r.eng, intent("ns/lost", "uid-lost", ""))
	run := r.rep.running(t, "uid-lost")

	sbs := r.env.sandboxesFor("ns/lost")
	if len(sbs) != 1 {
		t.Fatalf("sandboxes for ns/lost = %d, want exactly 1 (no double VM)", len(sbs))
	}
	if got := r.env.count("claim"); got != 2 {
		t.Errorf("claim requests = %d, want 2 (the first Pod's and the lost one, never repeated)", got)
	}
	if row, _ := r.store.Get("ns/lost"); sbs[0].ID != run.claim.ID || sbs[0].Token != row.Token {
		t.Fatalf("recovered claim %s does not carry the lost VM's id and token (%s)", run.claim.ID, sbs[0].ID)
	}
	if run.claim.Address != r.env.sim.OwnerAddr() {
		t.Errorf("recovered claim's address %q, want the node's owner_addr %q", run.claim.Address, r.env.sim.OwnerAddr())
	}
	row, ok := r.store.Get("ns/lost")
	if !ok || row.Token != sbs[0].Token {
		t.Fatal("the recovered credential is not durable")
	}
	// The recovered credential really is the release credential.
	res, err := r.eng.Delete(context.Background(), run.ref, verdict(true, "bare-pod"))
	if err != nil || !res.Held {
		t.Fatalf("Delete = %+v, %v", res, err)
	}
	if got := len(r.env.sandboxesFor("ns/lost")); got != 0 {
		t.Errorf("live sandboxes for ns/lost after release = %d, want 0", got)
	}
	if got := r.env.count("release_ok"); got != 1 {
		t.Errorf("release_ok = %d, want 1", got)
	}
}

// the sandboxd protocol (docs/architecture.md): with a non-root token a lost claim's credential cannot be
// recovered. The sandbox is left to its lease and never claimed over, across
// any number of retries: the Pod stays Pending with SandboxClaimUnrecoverable.
func TestLostResponseWithoutRootTokenIsNeverClaimedTwice(t *testing.T) {
	env := newSim(t, sim.Config{})
	st := openStore(t, tempStorePath(t), false)
	rep := newReporter()
	e := startEngine(t, testConfig(env.node, st, rep))

	env.sim.InjectFault(sim.Fault{Verb: pool.VerbClaim, Mode: "lose-response", Count: 1})
	create(t, e, intent("ns/lost", "uid-lost", ""))

	ev := rep.pending(t, "uid-lost", pipeline.ReasonLostClaim, 4) // several transactions
	if strings.Contains(ev.msg, nodeToken) || strings.Contains(ev.msg, rootToken) {
		t.Errorf("message leaks a token: %q", ev.msg)
	}
	if find(rep.snapshot(), "running", "uid-lost", "") >= 0 {
		t.Fatal("Running without a release credential")
	}
	if got := len(env.sandboxesFor("ns/lost")); got != 1 {
		t.Fatalf("sandboxes for ns/lost = %d after retries, want exactly 1", got)
	}
	if got := env.count("claim"); got != 1 {
		t.Errorf("claim requests = %d, want 1: the lost claim is never repeated", got)
	}
	if _, ok := e.Lookup("ns/lost"); ok {
		t.Error("a row exists without a credential")
	}
	// Once the lease ends the ref is free again, and the Pod is claimed.
	env.sim.Expire(env.sandboxesFor("ns/lost")[0].ID)
	run := rep.running(t, "uid-lost")
	if got := env.sandboxesFor("ns/lost"); len(got) != 1 || got[0].ID != run.claim.ID {
		t.Errorf("after the lease: sandboxes %v, want only the Running claim %s", got, run.claim.ID)
	}
}

// the claim states (docs/design.md): if the durable write fails, the claim just taken is released
// on a detached context and the Pod is never Running. If that release fails
// too, the credential stays in memory (tentative) so a later delete can
// still reach the VM.
func TestDurableWriteFailureRollsBack(t *testing.T) {
	setup := func(t *testing.T) (*simEnv, *faultyStore, *reporter, *pipeline.Engine) {
		env := newSim(t, sim.Config{})
		fs := &faultyStore{Store: openStore(t, tempStorePath(t), false)}
		fs.failPut.Store(true)
		rep := newReporter()
		cfg := testConfig(env.root, fs, rep)
		cfg.RequeueMin, cfg.RequeueMax = time.Hour, time.Hour // one transaction
		return env, fs, rep, startEngine(t, cfg)
	}

	t.Run("rollback-release", func(t *testing.T) {
		env, fs, rep, e := setup(t)
		create(t, e, intent("ns/nodisk", "uid-nodisk", ""))
		ev := rep.pending(t, "uid-nodisk", pipeline.ReasonStateWrite, 1)
		rep.outcome(t, pipeline.OutcomeRolledBack, 1)
		if !strings.Contains(ev.msg, "ns/nodisk") {
			t.Errorf("message %q does not name the pod key", ev.msg)
		}
		if find(rep.snapshot(), "running", "", "") >= 0 {
			t.Fatal("Running without a durable claim")
		}
		if got := env.count("claim_ok"); got != 1 {
			t.Errorf("claim_ok = %d, want 1", got)
		}
		if got := env.count("release_ok"); got != 1 {
			t.Errorf("release_ok = %d, want 1 (the rollback)", got)
		}
		if got := len(env.sim.Sandboxes()); got != 0 {
			t.Errorf("live sandboxes = %d after rollback, want 0", got)
		}
		if _, ok := e.Lookup("ns/nodisk"); ok {
			t.Error("a rolled-back claim is still in the table")
		}
		if fs.puts.Load() == 0 {
			t.Error("the store was never written")
		}
	})

	t.Run("rollback-release-fails-keeps-credential", func(t *testing.T) {
		env, _, rep, e := setup(t)
		env.sim.InjectFault(sim.Fault{Verb: pool.VerbRelease, Mode: "500"})
		create(t, e, intent("ns/nodisk", "uid-nodisk", ""))
		rep.pending(t, "uid-nodisk", pipeline.ReasonStateWrite, 1)
		rep.outcome(t, pipeline.OutcomeError, 1) // rollback attempted and failed

		sbs := env.sim.Sandboxes()
		if len(sbs) != 1 {
			t.Fatalf("live sandboxes = %d, want 1 (the rollback failed)", len(sbs))
		}
		cv, ok := e.Lookup("ns/nodisk")
		if !ok || cv.State != pipeline.StateTentative {
			t.Fatalf("Claim(ns/nodisk) = %v %v, want tentative", cv.State, ok)
		}
		if cv.ID != sbs[0].ID {
			t.Fatalf("the tentative row holds %s, want the live VM %s", cv.ID, sbs[0].ID)
		}
		if find(rep.snapshot(), "running", "", "") >= 0 {
			t.Fatal("a tentative claim was reported Running")
		}

		// The release below succeeds only with the VM's own token: the
		// tentative row kept the credential.
		env.sim.ClearFaults()
		deleteReleases(t, env, e, pipeline.PodRef{Key: "ns/nodisk", UID: "uid-nodisk"})
		if _, ok := e.Lookup("ns/nodisk"); ok {
			t.Error("the tentative row survived its release")
		}
	})

	// A tentative claim taken over by the key's next generation (same
	// owner: none) is that generation's, even when its commit and rollback
	// fail again: the new Pod's delete reaches the VM.
	t.Run("tentative-taken-over-by-the-next-generation", func(t *testing.T) {
		env, _, rep, e := setup(t)
		env.sim.InjectFault(sim.Fault{Verb: pool.VerbRelease, Mode: "500"})
		create(t, e, intent("ns/nodisk", "uid-nodisk", ""))
		rep.outcome(t, pipeline.OutcomeError, 1)
		create(t, e, intent("ns/nodisk", "uid-next", ""))
		rep.pending(t, "uid-next", pipeline.ReasonStateWrite, 1)
		rep.outcome(t, pipeline.OutcomeError, 2)

		if got := env.count("claim_ok"); got != 1 {
			t.Fatalf("claim_ok = %d, want 1 (the next generation takes the tentative claim over)", got)
		}
		cv, ok := e.Lookup("ns/nodisk")
		if !ok || cv.State != pipeline.StateTentative || cv.PodUID != "uid-next" {
			t.Fatalf("Claim(ns/nodisk) = %v %v for %q, want tentative for uid-next", cv.State, ok, cv.PodUID)
		}
		env.sim.ClearFaults()
		deleteReleases(t, env, e, pipeline.PodRef{Key: "ns/nodisk", UID: "uid-next"})
	})
}

// deleteReleases deletes ref's Pod (a bare Pod: release) and checks that
// the key held a claim and that no VM is left at sandboxd.
func deleteReleases(t *testing.T, env *simEnv, e *pipeline.Engine, ref pipeline.PodRef) {
	t.Helper()
	res, err := e.Delete(context.Background(), ref, verdict(true, "bare-pod"))
	if err != nil || !res.Held {
		t.Fatalf("Delete(%s, %s) = %+v, %v; want held and released", ref.Key, ref.UID, res, err)
	}
	if got := len(env.sim.Sandboxes()); got != 0 {
		t.Errorf("live sandboxes = %d after the delete, want 0", got)
	}
}
