package sim_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// Cold boots in flight hold their slot: concurrent claims never overshoot
// MaxClaims.
func TestMaxClaimsCountsClaimsStillBooting(t *testing.T) {
	n := newNode(t, sim.Config{MaxClaims: 5, Pools: map[pool.Key]int{defaultKey: 0}, ColdLatency: 50 * time.Millisecond})
	var wg sync.WaitGroup
	statuses := make(chan int, 20)
	for range 20 {
		wg.Go(func() {
			status, _ := n.do("POST", "/v1/claim", tenantToken, pool.ClaimRequest{Template: "default"})
			statuses <- status
		})
	}
	wg.Wait()
	close(statuses)
	got := map[int]int{}
	for s := range statuses {
		got[s]++
	}
	if got[200] != 5 || got[429] != 15 {
		t.Errorf("answers %v, want 5×200 and 15×429", got)
	}
	if c := n.sim.Counters(); c["claim_ok"] != 5 || c["claim_capacity"] != 15 {
		t.Errorf("counters %v", c)
	}
}

func TestCapacityKnobsApplyAtRuntime(t *testing.T) {
	n := newNode(t, sim.Config{MaxClaims: 1})
	a := n.claim("ns/a", 60)
	resp, _ := n.send("POST", "/v1/claim", tenantToken, pool.ClaimRequest{Template: "default"})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("at max: %d Retry-After=%q, want 429 without Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	n.sim.SetCapacity(sim.CapacityRedirect)
	status, body := n.do("POST", "/v1/claim", tenantToken, pool.ClaimRequest{Template: "default"})
	if status != 200 || !strings.Contains(string(body), `"redirect":["10.0.0.9:7777"]`) || strings.Contains(string(body), `"id":"sb_`) {
		t.Fatalf("redirect mode: %d %s", status, body)
	}
	n.sim.SetMaxClaims(0)
	n.claim("ns/b", 60)
	n.sim.SetMaxClaims(2)
	n.do("POST", "/v1/sandboxes/"+a.ID+"/release", a.Token, nil)
	n.claim("ns/c", 60) // the released slot is reusable
}

func TestFailRateAppliesAtRuntimeAndConsumesNothing(t *testing.T) {
	n := newNode(t, sim.Config{})
	n.sim.SetFailRate(1)
	status, body := n.do("POST", "/v1/claim", tenantToken, pool.ClaimRequest{Template: "default"})
	if status != 500 || !strings.Contains(string(body), "provisioning failed") {
		t.Fatalf("fail rate 1: %d %s", status, body)
	}
	if len(n.sim.Sandboxes()) != 0 {
		t.Error("a failed claim left a sandbox")
	}
	n.sim.SetFailRate(0)
	n.claim("ns/a", 60)
}

// Behind a proxy that hides the disconnect (FinishDetachedClaims) a claim
// outlives its caller: the client gives up during a cold boot, the VM is
// made anyway, and it is in the index only once it is made.
func TestDetachedClaimFinishesAfterTheClientHasGone(t *testing.T) {
	const boot = 400 * time.Millisecond
	n := newNode(t, sim.Config{Pools: map[pool.Key]int{defaultKey: 0}, ColdLatency: boot, FinishDetachedClaims: true})
	c, err := pool.NewClient(pool.ClientOptions{BaseURL: n.ts.URL, Token: tenantToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Claim(ctx, pool.ClaimRequest{Template: "default", ClaimRef: "ns/gone"}); err == nil {
		t.Fatal("the claim beat the client's deadline")
	}
	// Still booting (when this runs soon enough to tell): not listed.
	if time.Since(start) < boot {
		if got := n.sim.Sandboxes(); len(got) != 0 {
			t.Fatalf("the row appeared before the boot ended: %v", got)
		}
	}
	var seen time.Time
	testkit.WaitFor(t, 5*time.Second, "the abandoned claim's VM", func() bool {
		rows := n.list(rootToken, "?claim_ref=ns%2Fgone")
		if len(rows) == 1 && seen.IsZero() {
			seen = time.Now()
		}
		return len(rows) == 1
	})
	if d := seen.Sub(start); d < boot {
		t.Errorf("the row appeared %v after the claim, before the %v boot", d, boot)
	}
	if got := n.sim.Counters()["claim_ok"]; got != 1 {
		t.Errorf("claim_ok %d, want 1", got)
	}
}

// By default a claim runs on its request's context, as on real sandboxd:
// a caller that goes away before the VM is made, whether during the
// pre-admission latency, while held or while the VM boots, cancels it.
// Nothing is indexed and the slot is given back; FinishDetachedClaims
// finishes it instead.
func TestClaimIsCancelledWhenItsCallerGoesAway(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  sim.Config
		hold bool
	}{
		{"latency", sim.Config{ClaimLatency: time.Minute}, false},
		{"held", sim.Config{}, true},
		{"boot", sim.Config{Pools: map[pool.Key]int{defaultKey: 0}, ColdLatency: time.Minute}, false},
		{"detached", sim.Config{ClaimLatency: 300 * time.Millisecond, FinishDetachedClaims: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.cfg)
			if tc.hold {
				t.Cleanup(n.sim.HoldNextClaim())
			}
			c, err := pool.NewClient(pool.ClientOptions{BaseURL: n.ts.URL, Token: rootToken})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			_, err = c.Claim(ctx, pool.ClaimRequest{Template: "default", ClaimRef: "ns/gone"})
			cancel()
			if err == nil {
				t.Fatal("the claim beat the client's deadline")
			}
			detached := tc.cfg.FinishDetachedClaims
			testkit.WaitFor(t, 5*time.Second, "the server to end the claim", func() bool {
				cs := n.sim.Counters()
				return cs["claim_cancelled"]+cs["claim_ok"] == 1
			})
			want := 0
			if detached {
				want = 1
			}
			if got := n.sim.Sandboxes(); len(got) != want || n.sim.Counters()["claim_ok"] != int64(want) {
				t.Fatalf("sandboxes %v claim_ok %d, want %d", got, n.sim.Counters()["claim_ok"], want)
			}
			// A claim cancelled while it booted gave its slot back.
			if _, body := n.do("GET", "/metrics", rootToken, nil); !strings.Contains(string(body), "sandboxd_sim_provisioning 0\n") {
				t.Errorf("a slot is still held:\n%s", body)
			}
		})
	}
}

// LoseAnswerRate makes the VM and indexes it, then never answers: the
// caller meets its own deadline, and the VM is found by its claim_ref.
func TestLostAnswerLeavesAVMItsCallerNeverSaw(t *testing.T) {
	n := newNode(t, sim.Config{LoseAnswerRate: 1})
	c, err := pool.NewClient(pool.ClientOptions{BaseURL: n.ts.URL, Token: rootToken, ClaimTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if vm, err := c.Claim(t.Context(), pool.ClaimRequest{Template: "default", ClaimRef: "ns/lost"}); err == nil {
		t.Fatalf("the lost answer arrived: %v", vm)
	}
	rows := n.list(rootToken, "?claim_ref=ns%2Flost")
	if len(rows) != 1 {
		t.Fatalf("rows for ns/lost: %v, want the VM whose answer was lost", rows)
	}
	if cs := n.sim.Counters(); cs["claim_ok"] != 1 || cs["claim_answer_lost"] != 1 {
		t.Errorf("counters %v, want claim_ok 1 and claim_answer_lost 1", cs)
	}
	n.sim.SetLoseAnswerRate(0)
	n.claim("ns/answered", 60)
}

// ProvisionLatency applies to warm claims too, and is spent before the row
// exists (the row's claimed_at is after it).
func TestProvisionLatencyIsSpentBeforeTheRowExists(t *testing.T) {
	n := newNode(t, sim.Config{ProvisionLatency: 150 * time.Millisecond})
	start := time.Now()
	c := n.claim("ns/a", 60)
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("a warm claim answered after %v, want at least the provision latency", d)
	}
	rows := n.list(rootToken, "")
	if len(rows) != 1 || rows[0].ID != c.ID || rows[0].ClaimedAt.Before(start.Add(150*time.Millisecond).Truncate(time.Millisecond)) {
		t.Errorf("rows %v: want claimed_at after the provision latency", rows)
	}
}

func TestInfoReportsWarmRefillingAndCounters(t *testing.T) {
	n := newNode(t, sim.Config{Pools: map[pool.Key]int{defaultKey: 2}, RefillDelay: time.Hour})
	n.claim("ns/a", 60)
	info := n.info()
	want := pool.PoolInfo{Key: fullKey, Warm: 1, Refilling: 1, Target: 2}
	if len(info.Pools) != 1 || info.Pools[0] != want || info.Claimed != 1 || info.Counters["claim"] != 1 {
		t.Errorf("info %+v, want pool %+v, claimed 1, claim counter 1", info, want)
	}
	if info.AtCapacity || info.Draining || len(info.Peers) != 0 {
		t.Errorf("info %+v: a single uncapped node is neither at capacity, draining nor meshed", info)
	}
}

func TestReaperRemovesSandboxesAtTheirDeadline(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 1)
	b := n.claim("ns/b", 600)
	testkit.WaitFor(t, 5*time.Second, "the 1s lease to end", func() bool { return len(n.sim.Sandboxes()) == 1 })
	if got := n.sim.Sandboxes(); got[0].ID != b.ID {
		t.Errorf("reaped the wrong sandbox: %v left", got)
	}
	if status, _ := n.do("POST", "/v1/sandboxes/"+a.ID+"/release", a.Token, nil); status != 404 {
		t.Errorf("release after the lease: %d, want 404", status)
	}
}

// The reaper skips its scan while no lease can be due (see index.soonest):
// a short lease claimed, or a deadline moved, after a scan has raised that
// bound to a long lease must still be reaped on time.
func TestReaperSeesShorterLeasesAfterALongOne(t *testing.T) {
	n := newNode(t, sim.Config{})
	long := n.claim("ns/long", 600)
	n.claim("ns/short", 1)
	testkit.WaitFor(t, 5*time.Second, "the 1s lease to end", func() bool { return len(n.sim.Sandboxes()) == 1 })
	moved := n.claim("ns/moved", 600)
	n.sim.SetDeadline(moved.ID, time.Now().Add(-time.Second))
	testkit.WaitFor(t, 5*time.Second, "the moved lease to end", func() bool { return len(n.sim.Sandboxes()) == 1 })
	if got := n.sim.Sandboxes(); got[0].ID != long.ID {
		t.Errorf("reaped the wrong sandbox: %v left", got)
	}
}
