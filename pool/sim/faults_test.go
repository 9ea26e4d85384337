package sim_test

import (
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestFaultAppliesToCountRequestsOfItsVerb(t *testing.T) {
	n := newNode(t, sim.Config{})
	n.sim.InjectFault(sim.Fault{Verb: "list", Mode: "500", Count: 2})
	if status, _ := n.do("GET", "/v1/info", rootToken, nil); status != 200 {
		t.Errorf("another verb: %d, want untouched", status)
	}
	for i, want := range []int{500, 500, 200} {
		if status, _ := n.do("GET", "/v1/sandboxes", tenantToken, nil); status != want {
			t.Errorf("list %d: %d, want %d", i, status, want)
		}
	}
}

func TestFaultWithoutCountLastsUntilCleared(t *testing.T) {
	n := newNode(t, sim.Config{})
	n.sim.InjectFault(sim.Fault{Mode: "409"}) // any verb
	for range 3 {
		if status, _ := n.do("GET", "/v1/info", rootToken, nil); status != 409 {
			t.Fatalf("info: %d, want 409", status)
		}
	}
	n.sim.ClearFaults()
	if status, _ := n.do("GET", "/v1/info", rootToken, nil); status != 200 {
		t.Errorf("after ClearFaults: %d", status)
	}
}

// Retry-After comes with 503 only: always there (1s unless set, none only
// when asked with a negative value), never on a 429 unless the non-real
// mode asks for it.
func TestFaultRetryAfterIsA503Thing(t *testing.T) {
	n := newNode(t, sim.Config{})
	for _, tc := range []struct {
		fault      sim.Fault
		status     int
		retryAfter string
	}{
		{sim.Fault{Mode: "503", RetryAfter: 1500 * time.Millisecond}, 503, "2"},
		{sim.Fault{Mode: "503"}, 503, "1"},
		{sim.Fault{Mode: "503", RetryAfter: -1}, 503, ""},
		{sim.Fault{Mode: "429", RetryAfter: 5 * time.Second}, 429, ""},
		{sim.Fault{Mode: "429-retry-after", RetryAfter: 5 * time.Second}, 429, "5"},
	} {
		tc.fault.Verb, tc.fault.Count = "list", 1
		n.sim.InjectFault(tc.fault)
		resp, body := n.send("GET", "/v1/sandboxes", tenantToken, nil)
		if resp.StatusCode != tc.status || resp.Header.Get("Retry-After") != tc.retryAfter {
			t.Errorf("%+v: %d Retry-After=%q, want %d and %q", tc.fault, resp.StatusCode, resp.Header.Get("Retry-After"), tc.status, tc.retryAfter)
		}
		errorBody(t, tc.fault.Mode, body)
	}
}

func TestFaultsApplyToRenewAndStats(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 60)
	n.sim.InjectFault(sim.Fault{Verb: "renew", Mode: "500", Count: 1})
	n.sim.InjectFault(sim.Fault{Verb: "stats", Mode: "409", Count: 1})
	if status, _ := n.do("POST", "/v1/sandboxes/"+a.ID+"/renew", a.Token, nil); status != 500 {
		t.Errorf("renew: %d, want the injected 500", status)
	}
	if status, _ := n.do("GET", "/v1/sandboxes/"+a.ID+"/stats", rootToken, nil); status != 409 {
		t.Errorf("stats: %d, want the injected 409", status)
	}
	if c := n.sim.Counters(); c["renew"] != 1 || c["renew_ok"] != 0 || c["stats"] != 1 {
		t.Errorf("counters %v", c)
	}
}

func TestLoseResponseStillPerformsTheClaim(t *testing.T) {
	n := newNode(t, sim.Config{})
	n.sim.InjectFault(sim.Fault{Verb: "claim", Mode: "lose-response", Count: 1})
	c, err := pool.NewClient(pool.ClientOptions{BaseURL: n.ts.URL, Token: tenantToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if _, err := c.Claim(t.Context(), pool.ClaimRequest{Template: "default", ClaimRef: "ns/lost"}); err == nil {
		t.Fatal("the response was supposed to be lost")
	}
	got := n.sim.Sandboxes()
	if len(got) != 1 || got[0].ClaimRef != "ns/lost" || n.sim.Counters()["claim_ok"] != 1 {
		t.Errorf("sandboxes %v: want the one VM the caller never heard of", got)
	}
}

func TestSlowFaultDelaysThenAnswers(t *testing.T) {
	n := newNode(t, sim.Config{})
	n.sim.InjectFault(sim.Fault{Verb: "info", Mode: "slow", Count: 1, Delay: 100 * time.Millisecond})
	start := time.Now()
	if status, _ := n.do("GET", "/v1/info", rootToken, nil); status != 200 {
		t.Errorf("slow: %d", status)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("answered after %v", d)
	}
}

func TestUnknownFaultModePanics(t *testing.T) {
	n := newNode(t, sim.Config{})
	defer func() {
		if recover() == nil {
			t.Error("a typo in a fault mode must not pass silently")
		}
	}()
	n.sim.InjectFault(sim.Fault{Mode: "5OO"})
}
