package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// the background loops (docs/architecture.md) lease watch: once a recorded deadline passes, the listing
// decides. Gone: the row is dropped and Expired is pushed. Still listed: the
// row takes the listing's deadline. Listing failed: nothing is decided.
func TestLeaseExpiryPushesExpired(t *testing.T) {
	r, clk := newLoopRig(t, sim.Config{}, nil, pipeline.LoopLeaseWatch)
	ctx := context.Background()
	create(t, r.eng, intent("ns/ends", "uid-ends", ""))
	create(t, r.eng, intent("ns/extended", "uid-ext", ""))
	create(t, r.eng, intent("ns/young", "uid-young", ""))
	ends := r.rep.running(t, "uid-ends")
	ext := r.rep.running(t, "uid-ext")
	r.rep.running(t, "uid-young")
	// young's deadline is pushed far out, so it is never due in this test.
	young, _ := r.store.Get("ns/young")
	young.Deadline = time.Now().Add(24 * time.Hour)
	if err := r.store.Put(ctx, "ns/young", young); err != nil {
		t.Fatal(err)
	}

	later := ext.claim.Deadline.Add(30 * time.Minute).UTC().Truncate(time.Millisecond)
	r.env.sim.SetDeadline(ext.claim.ID, later)
	r.env.sim.Expire(ends.claim.ID)
	now := ext.claim.Deadline.Add(time.Second) // both recorded deadlines passed
	if ends.claim.Deadline.After(now) {
		now = ends.claim.Deadline.Add(time.Second)
	}
	// The failed pass runs a millisecond before a tick, so that the next
	// look comes at once.
	now = clk.beforeTick(now, time.Millisecond)

	t.Run("listing-failure-decides-nothing", func(t *testing.T) {
		r.env.sim.InjectFault(sim.Fault{Verb: pool.VerbList, Mode: "500"})
		clk.passAt(t, pipeline.LoopLeaseWatch, now)
		r.env.sim.ClearFaults()
		if n := countOf(r.rep.snapshot(), "expired", "", ""); n != 0 {
			t.Fatalf("%d Expired pushed on a failed listing", n)
		}
		if _, ok := r.store.Get("ns/ends"); !ok {
			t.Fatal("a row was dropped on a failed listing")
		}
		if row, _ := r.store.Get("ns/extended"); !row.Deadline.Equal(ext.claim.Deadline) {
			t.Fatal("a deadline changed on a failed listing")
		}
	})

	t.Run("gone-expires-listed-refreshes", func(t *testing.T) {
		// After the failed listing the rows wait out a backoff (one check
		// interval, with jitter) instead of listing every tick.
		lists := r.env.count("list")
		clk.passAt(t, pipeline.LoopLeaseWatch, now.Add(time.Millisecond))
		if got := r.env.count("list"); got != lists {
			t.Fatalf("the lease watch listed again at once after a failed listing (%d → %d)", lists, got)
		}
		now = now.Add(2 * time.Second)
		clk.passAt(t, pipeline.LoopLeaseWatch, now)
		evs := r.rep.waitFor(t, "Expired of uid-ends", func(evs []event) bool { return find(evs, "expired", "uid-ends", "") >= 0 })
		ev := evs[find(evs, "expired", "uid-ends", "")]
		if ev.ref.Key != "ns/ends" || ev.claim.ID != ends.claim.ID {
			t.Errorf("Expired(%s, %s), want ns/ends %s", ev.ref.Key, ev.claim.ID, ends.claim.ID)
		}
		if n := countOf(evs, "expired", "", ""); n != 1 {
			t.Errorf("%d Expired pushed, want 1", n)
		}
		if _, ok := r.store.Get("ns/ends"); ok {
			t.Error("the expired row is still in the store")
		}
		if _, ok := r.eng.Lookup("ns/ends"); ok {
			t.Error("the engine still holds the expired claim")
		}
		row, ok := r.store.Get("ns/extended")
		if !ok || !row.Deadline.Equal(later) {
			t.Errorf("ns/extended deadline = %v (held %v), want the listing's %v", row.Deadline, ok, later)
		}
		if row, ok := r.store.Get("ns/young"); !ok || !row.Deadline.Equal(young.Deadline) {
			t.Error("a row that was not due was touched")
		}
		if got := r.env.count("release"); got != 0 {
			t.Errorf("release requests = %d, want 0: the lease watch never releases", got)
		}
	})
}

// the background loops (docs/architecture.md) orphan scan: it reports (it releases only undelivered VMs, and
// there are none here). Listed sandboxes that no claim
// knows about and claims whose sandbox is not listed are counted; nothing
// is released, and a failed listing is not an empty list.
func TestOrphanScanOnlyReports(t *testing.T) {
	obs := &orphanObs{}
	r, clk := newLoopRig(t, sim.Config{}, func(c *pipeline.Config) { c.OrphanObserver = obs }, pipeline.LoopOrphanScan)
	ctx := context.Background()
	// A VM this node made and no row holds is an orphan; another client's
	// VM, even under a look-alike claim_ref, is none of its business.
	if _, err := r.env.root.Claim(ctx, pool.ClaimRequest{Template: template, ClaimRef: mustRef(testID, "ns/nobody", "uid-nobody"),
		Metadata: testID.Labels(pipeline.PodRef{Key: "ns/nobody", UID: "uid-nobody"})}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.env.root.Claim(ctx, pool.ClaimRequest{Template: template, ClaimRef: "ns/healthy"}); err != nil {
		t.Fatal(err)
	}
	create(t, r.eng, intent("ns/healthy", "uid-healthy", ""))
	create(t, r.eng, intent("ns/vanished", "uid-vanished", ""))
	r.rep.running(t, "uid-healthy")
	gone := r.rep.running(t, "uid-vanished")
	r.env.sim.Expire(gone.claim.ID)

	r.env.sim.InjectFault(sim.Fault{Verb: pool.VerbList, Mode: "500"})
	clk.pass(t, pipeline.LoopOrphanScan)
	r.env.sim.ClearFaults()
	if len(obs.verdicts) != 0 || len(obs.scans) != 1 || obs.scans[0] {
		t.Fatalf("failed listing: scans %v verdicts %v, want one failed scan and no verdict", obs.scans, obs.verdicts)
	}

	clk.pass(t, pipeline.LoopOrphanScan)
	if len(obs.verdicts) != 1 || obs.verdicts[0] != [3]int{1, 1, 0} {
		t.Fatalf("verdicts = %v, want one (unknown 1, missing 1, foreign 0)", obs.verdicts)
	}
	if len(obs.scans) != 2 || !obs.scans[1] {
		t.Errorf("scans = %v, want the second ok", obs.scans)
	}
	if got := r.env.count("release"); got != 0 {
		t.Errorf("release requests = %d, want 0", got)
	}
	if _, ok := r.store.Get("ns/vanished"); !ok {
		t.Error("the orphan scan dropped a row; it only reports")
	}
	if got := len(r.env.sandboxesFor("ns/nobody")); got != 1 {
		t.Errorf("the unknown sandbox was touched: %d left", got)
	}
}

// After a restart the lifetime a claim's Pod asked for is not known until
// virtual-kubelet hands the Pod back, which an apiserver outage can delay
// past the grant. Meanwhile the claim is renewed, so the node does not reap
// a VM whose Pod asked for longer.
func TestALeaseIsRenewedBeforeItsPodIsSeenAgain(t *testing.T) {
	// The seeded claim asks an hour; the node grants up to two, so the
	// renewal's deadline is later however little wall time has passed.
	env := newSim(t, sim.Config{MaxTTL: 2 * time.Hour})
	var clk *loopClock
	_, st, _, vm := seedRow(t, env, "ns/restored", store.Claim{PodUID: "uid-r"}, func(c *pipeline.Config) {
		clk = driveLoops(c, pipeline.LoopLeaseWatch)
	})
	before, _ := st.Get("ns/restored")
	clk.passAt(t, pipeline.LoopLeaseWatch, vm.Deadline.Add(-time.Second)) // within the renewal lead
	after, _ := st.Get("ns/restored")
	if got := env.count("renew_ok"); got != 1 || !after.Deadline.After(before.Deadline) {
		t.Fatalf("renew_ok = %d, deadline %s -> %s: a restored claim whose Pod is not seen yet was left to its grant",
			got, before.Deadline, after.Deadline)
	}
}

// A pass over rows that are all far from their deadlines is skipped until
// one of them can be due, but never past a change to the state file: a
// claim recorded after such a pass, with a shorter lease, is still
// expired when its deadline passes.
func TestLeaseWatchSeesAShortLeaseRecordedAfterAQuietPass(t *testing.T) {
	r, clk := newLoopRig(t, sim.Config{}, nil, pipeline.LoopLeaseWatch)
	ctx := context.Background()
	create(t, r.eng, intent("ns/long", "uid-long", ""))
	r.rep.running(t, "uid-long")
	long, _ := r.store.Get("ns/long")
	long.Deadline = time.Now().Add(24 * time.Hour)
	if err := r.store.Put(ctx, "ns/long", long); err != nil {
		t.Fatal(err)
	}
	clk.pass(t, pipeline.LoopLeaseWatch) // the full pass: nothing is due for a day
	clk.pass(t, pipeline.LoopLeaseWatch) // a quiet one

	create(t, r.eng, intent("ns/short", "uid-short", ""))
	short := r.rep.running(t, "uid-short")
	r.env.sim.Expire(short.claim.ID)
	clk.passAt(t, pipeline.LoopLeaseWatch, clk.beforeTick(short.claim.Deadline.Add(time.Second), 0))
	r.rep.waitFor(t, "Expired of uid-short", func(evs []event) bool { return find(evs, "expired", "uid-short", "") >= 0 })
	if _, ok := r.store.Get("ns/short"); ok {
		t.Error("the expired row is still in the store")
	}
	if row, ok := r.store.Get("ns/long"); !ok || !row.Deadline.Equal(long.Deadline) {
		t.Error("the row that was not due was touched")
	}
}
