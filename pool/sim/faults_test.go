package sim_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestFaultAppliesToCountRequestsOfItsVerb(t *testing.T) {
	n := newNode(t, sim.Config{})
	n.sim.InjectFault(sim.Fault{Verb: "list", Mode: "500", Count: 2})
	if status, _ := n.do("GET", "/v1/info", nodeToken, nil); status != 200 {
		t.Errorf("another verb: %d, want untouched", status)
	}
	for i, want := range []int{500, 500, 200} {
		if status, _ := n.do("GET", "/v1/sandboxes", nodeToken, nil); status != want {
			t.Errorf("list %d: %d, want %d", i, status, want)
		}
	}
}

func TestFaultWithoutCountLastsUntilCleared(t *testing.T) {
	n := newNode(t, sim.Config{})
	n.sim.InjectFault(sim.Fault{Mode: "409"}) // any verb
	for range 3 {
		if status, _ := n.do("GET", "/v1/info", nodeToken, nil); status != 409 {
			t.Fatalf("info: %d, want 409", status)
		}
	}
	n.sim.ClearFaults()
	if status, _ := n.do("GET", "/v1/info", nodeToken, nil); status != 200 {
		t.Errorf("after ClearFaults: %d", status)
	}
}

func Test503FaultSendsRetryAfterInWholeSeconds(t *testing.T) {
	n := newNode(t, sim.Config{})
	n.sim.InjectFault(sim.Fault{Verb: "info", Mode: "503", Count: 1, RetryAfter: 1500 * time.Millisecond})
	req, _ := http.NewRequestWithContext(t.Context(), "GET", n.ts.URL+"/v1/info", nil)
	resp, err := n.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != strconv.Itoa(2) {
		t.Errorf("%d Retry-After=%q, want 503 and 2", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestLoseResponseStillPerformsTheClaim(t *testing.T) {
	n := newNode(t, sim.Config{})
	n.sim.InjectFault(sim.Fault{Verb: "claim", Mode: "lose-response", Count: 1})
	c, err := pool.NewClient(pool.ClientOptions{BaseURL: n.ts.URL, Token: nodeToken})
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
	if status, _ := n.do("GET", "/v1/info", nodeToken, nil); status != 200 {
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
