package pool_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(runThen{m}) }

// afterRun holds what must be undone once every test and benchmark ran
// (a binary built for the benchmarks). Tests run it from one goroutine.
var afterRun []func()

type runThen struct{ m *testing.M }

func (r runThen) Run() int {
	code := r.m.Run()
	for _, f := range afterRun {
		f()
	}
	return code
}

// Tokens with dashes are not token-shaped to the scrubber's heuristic, so
// they are only kept out of errors by the verbatim redaction: both paths get
// exercised (sandbox tokens are 32 hex and hit the heuristic too).
const (
	rootToken = "root-tok-7f3a-c0ffee-secret"
	nodeToken = "node-tok-91b2-beef-secret"
)

var defaultKey = simtest.DefaultPool

// harness is a real emulator behind a real HTTP server, with clients for the
// root and the node token. Every error a test produces goes through h.err,
// and at cleanup every one of them is checked for every token seen.
type harness struct {
	t    *testing.T
	emu  *simtest.Emulator
	sim  *sim.Server
	url  string
	root *pool.Client // holds the api_token
	node *pool.Client // holds the node token

	mu      sync.Mutex
	errs    []error
	secrets []string
}

// fastRetry keeps retry tests quick without changing the policy's shape.
var fastRetry = pool.RetryPolicy{InitialInterval: 5 * time.Millisecond, MaxInterval: 20 * time.Millisecond}

func newHarness(t *testing.T, cfg sim.Config) *harness {
	t.Helper()
	cfg.RootToken, cfg.NodeToken = rootToken, nodeToken
	if cfg.ColdLatency == 0 {
		cfg.ColdLatency = -1
	}
	e := simtest.Start(t, cfg) // nil Pools: defaultKey, 4 warm
	h := &harness{t: t, emu: e, sim: e.Sim, url: e.URL, secrets: []string{rootToken, nodeToken}}
	h.root = h.client(rootToken, nil)
	h.node = h.client(nodeToken, nil)
	t.Cleanup(func() {
		for _, sb := range e.Sim.Sandboxes() {
			h.secret(sb.Token)
		}
		h.assertNoTokenInErrors()
	})
	return h
}

// client builds a client for token; mod may adjust the options.
func (h *harness) client(token string, mod func(*pool.ClientOptions)) *pool.Client {
	h.t.Helper()
	o := pool.ClientOptions{Token: token, Retry: fastRetry}
	if mod != nil {
		mod(&o)
	}
	return h.emu.Client(h.t, o)
}

// err records err for the token audit and returns it.
func (h *harness) err(err error) error {
	if err != nil {
		h.mu.Lock()
		h.errs = append(h.errs, err)
		h.mu.Unlock()
	}
	return err
}

func (h *harness) secret(tok string) {
	if tok != "" {
		h.mu.Lock()
		h.secrets = append(h.secrets, tok)
		h.mu.Unlock()
	}
}

func (h *harness) assertNoTokenInErrors() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, err := range h.errs {
		for _, s := range h.secrets {
			if strings.Contains(err.Error(), s) {
				h.t.Errorf("error %q contains a token", err)
			}
		}
	}
}

// claim makes one claim that must succeed.
func (h *harness) claim(ref string, ttl int64) pool.ClaimResponse {
	h.t.Helper()
	resp, err := h.node.Claim(ctx(h.t), pool.ClaimRequest{Template: "default", TTLSeconds: ttl, ClaimRef: ref})
	if h.err(err) != nil {
		h.t.Fatalf("claim %s: %v", ref, err)
	}
	h.secret(resp.Token)
	return resp
}

func (h *harness) count(name string) int64 { return h.sim.Counters()[name] }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// statuses is an Observer that records every attempt.
type statuses struct {
	mu  sync.Mutex
	got []int
}

func (s *statuses) Request(_ string, status int, _ time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, status)
}

func (s *statuses) list() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.got...)
}

// stub serves one fixed answer for every request.
func stub(t *testing.T, status int, body string) *pool.Client {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(ts.Close)
	c, err := pool.NewClient(pool.ClientOptions{BaseURL: ts.URL, Token: nodeToken, Retry: pool.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}
