package pipeline_test

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// trickleBody answers the first n claims in full at sandboxd, then hands
// the client a body that arrives a byte every 50ms: a sandboxd (or a proxy
// in front of it) whose answer stalls after its headers.
type trickleBody struct {
	next http.RoundTripper
	left atomic.Int64
}

func (t *trickleBody) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil || r.URL.Path != "/v1/claim" || t.left.Add(-1) < 0 {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		for _, b := range body {
			select {
			case <-r.Context().Done():
				pw.CloseWithError(r.Context().Err())
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := pw.Write([]byte{b}); err != nil {
				return
			}
		}
	}()
	resp.Body = pr
	return resp, nil
}

// R3 with a hung sandboxd, a trickling answer, claims cancelled by their
// caller's disconnect (real sandboxd), claims that finish after their
// caller gave up (behind a proxy that hides the disconnect), and claims
// finalized whose answer never came. Every claim attempt has a deadline
// (200ms here), so no behaviour stalls the engine, and each Pod ends
// Running on exactly one VM: a lost answer is recovered by the lookup, and
// a VM that shows up only after the Pod got another one is released as
// undelivered.
func TestR3HungSlowBodyAndLateFinishingClaims(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(*sim.Server)
		slow     bool // the first claim's answer trickles
		detached bool // sandboxd finishes a claim whose caller left
	}{
		{"hung", func(s *sim.Server) {
			s.InjectFault(sim.Fault{Verb: pool.VerbClaim, Mode: "slow", Count: 1, Delay: 3 * time.Second})
		}, false, false},
		{"slow-body", func(*sim.Server) {}, true, false},
		{"cancelled-by-disconnect", func(s *sim.Server) { s.SetClaimLatency(700 * time.Millisecond) }, false, false},
		{"finishes-after-disconnect", func(s *sim.Server) { s.SetClaimLatency(700 * time.Millisecond) }, false, true},
		{"answer-lost", func(s *sim.Server) { s.SetLoseAnswerRate(1) }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			env := newSim(t, sim.Config{FinishDetachedClaims: tc.detached})
			rt := &trickleBody{next: http.DefaultTransport.(*http.Transport).Clone()}
			if tc.slow {
				rt.left.Store(1)
			}
			c, err := pool.NewClient(pool.ClientOptions{BaseURL: env.url, Token: rootToken, Retry: fastRetry,
				Transport: rt, ClaimTimeout: 200 * time.Millisecond, AttemptTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.CloseIdleConnections)
			rep := newReporter()
			cfg := testConfig(c, openStore(t, tempStorePath(t), false), rep)
			cfg.ClaimRetry.MaxAttempts = r3Attempts
			cfg.SettleWindow = time.Nanosecond
			cfg.Owners = allOwnersGone
			clk := driveLoops(&cfg, pipeline.LoopOrphanScan)
			e := startEngine(t, cfg)
			<-e.Listed()
			tc.setup(env.sim)
			it := intent("r3/"+tc.name, "uid-"+tc.name, "owner-1")
			start := time.Now()
			create(t, e, it)
			testkit.WaitFor(t, waitTimeout, "the first claim at sandboxd", func() bool { return env.sim.Counters()["claim"] >= 1 })
			env.sim.SetClaimLatency(0)
			env.sim.SetLoseAnswerRate(0)
			run := rep.running(t, it.Ref.UID)
			t.Logf("%s: Running after %v", tc.name, time.Since(start).Round(time.Millisecond))
			// Whatever sandboxd still finishes shows up within its delay.
			testkit.WaitFor(t, waitTimeout, "sandboxd to finish every claim it took", func() bool {
				c := env.sim.Counters()
				return c["claim_ok"]+c["claim_error"]+c["claim_capacity"]+c["claim_cancelled"] >= c["claim"]
			})
			clk.pass(t, pipeline.LoopOrphanScan)
			live := liveFor(env.sim, it.Ref.Key)
			if len(live) != 1 || live[0].ID != run.claim.ID {
				t.Fatalf("%s: live VMs %v, want exactly the Running claim %s", tc.name, live, run.claim.ID)
			}
			if _, err := e.Delete(context.Background(), it.Ref, verdict(true, "owner-gone")); err != nil {
				t.Fatal(err)
			}
			if n := len(env.sim.Sandboxes()); n != 0 {
				t.Fatalf("%s: %d VMs after the release, want 0 (none leaked, none lost)", tc.name, n)
			}
		})
	}
}
