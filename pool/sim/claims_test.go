package sim_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

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
			status, _ := n.do("POST", "/v1/claim", nodeToken, pool.ClaimRequest{Template: "default"})
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
	if status, _ := n.do("POST", "/v1/claim", nodeToken, pool.ClaimRequest{Template: "default"}); status != 429 {
		t.Fatalf("at max: %d, want 429", status)
	}
	n.sim.SetCapacity(sim.CapacityRedirect)
	status, body := n.do("POST", "/v1/claim", nodeToken, pool.ClaimRequest{Template: "default"})
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
	status, body := n.do("POST", "/v1/claim", nodeToken, pool.ClaimRequest{Template: "default"})
	if status != 500 || !strings.Contains(string(body), "provisioning failed") {
		t.Fatalf("fail rate 1: %d %s", status, body)
	}
	if len(n.sim.Sandboxes()) != 0 {
		t.Error("a failed claim left a sandbox")
	}
	n.sim.SetFailRate(0)
	n.claim("ns/a", 60)
}

func TestClaimAbandonedBeforeAdmissionMakesNoSandbox(t *testing.T) {
	s, err := sim.New(sim.Config{RootToken: rootToken, Pools: map[pool.Key]int{defaultKey: 1}, ClaimLatency: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts := httptest.NewServer(s.Handler())
	c, err := pool.NewClient(pool.ClientOptions{BaseURL: ts.URL, Token: rootToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Claim(ctx, pool.ClaimRequest{Template: "default"}); err == nil {
		t.Fatal("claim beat its deadline")
	}
	c.CloseIdleConnections()
	ts.Close() // waits for the handler to return
	if got := s.Sandboxes(); len(got) != 0 || s.Counters()["claim_ok"] != 0 {
		t.Errorf("abandoned claim made %v", got)
	}
}

func TestOwnerAddrsAreUniqueWithinThePrefix(t *testing.T) {
	n := newNode(t, sim.Config{AddrPrefix: "192.168.7"})
	seen := map[string]bool{}
	for range 20 {
		c := n.claim("", 60)
		if !strings.HasPrefix(c.OwnerAddr, "192.168.7.") || !strings.HasSuffix(c.OwnerAddr, ":7777") || seen[c.OwnerAddr] {
			t.Fatalf("owner_addr %q (seen before: %v)", c.OwnerAddr, seen[c.OwnerAddr])
		}
		seen[c.OwnerAddr] = true
	}
}

func TestInfoReportsWarmRefillingAndCounters(t *testing.T) {
	n := newNode(t, sim.Config{Pools: map[pool.Key]int{defaultKey: 2}, RefillDelay: time.Hour})
	n.claim("ns/a", 60)
	status, body := n.do("GET", "/v1/info", nodeToken, nil)
	var info pool.Info
	if status != 200 || json.Unmarshal(body, &info) != nil {
		t.Fatalf("info: %d %s", status, body)
	}
	want := pool.PoolInfo{Key: defaultKey, Warm: 1, Refilling: 1, Target: 2}
	if len(info.Pools) != 1 || info.Pools[0] != want || info.Claimed != 1 || info.Counters["claim"] != 1 {
		t.Errorf("info %+v, want pool %+v, claimed 1, claim counter 1", info, want)
	}
}

func TestReaperRemovesSandboxesAtTheirDeadline(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 1)
	b := n.claim("ns/b", 600)
	waitFor(t, 5*time.Second, "the 1s lease to end", func() bool { return len(n.sim.Sandboxes()) == 1 })
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
	waitFor(t, 5*time.Second, "the 1s lease to end", func() bool { return len(n.sim.Sandboxes()) == 1 })
	moved := n.claim("ns/moved", 600)
	n.sim.SetDeadline(moved.ID, time.Now().Add(-time.Second))
	waitFor(t, 5*time.Second, "the moved lease to end", func() bool { return len(n.sim.Sandboxes()) == 1 })
	if got := n.sim.Sandboxes(); got[0].ID != long.ID {
		t.Errorf("reaped the wrong sandbox: %v left", got)
	}
}
