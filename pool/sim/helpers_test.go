package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	rootToken = "root-tok-5d1e-secret"
	nodeToken = "node-tok-a77c-secret"
)

var defaultKey = pool.Key{Template: "default"}

// node is an emulator behind a real HTTP server, spoken to with raw HTTP
// so that the wire format itself is what is checked.
type node struct {
	t   *testing.T
	sim *sim.Server
	ts  *httptest.Server
}

func newNode(t *testing.T, cfg sim.Config) *node {
	t.Helper()
	if cfg.RootToken == "" {
		cfg.RootToken = rootToken
	}
	if cfg.NodeToken == "" {
		cfg.NodeToken = nodeToken
	}
	if cfg.Pools == nil {
		cfg.Pools = map[pool.Key]int{defaultKey: 4}
	}
	if cfg.ColdLatency == 0 {
		cfg.ColdLatency = -1
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("sim.New: %v", err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &node{t: t, sim: s, ts: ts}
}

// do sends one request and returns the status and body.
func (n *node) do(method, path, token string, body any) (int, []byte) {
	n.t.Helper()
	return do(n.t, n.ts.Client(), n.ts.URL, method, path, token, body)
}

func do(t *testing.T, hc *http.Client, base, method, path, token string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp.StatusCode, data
}

// claim makes a claim that must succeed.
func (n *node) claim(ref string, ttl int64) pool.ClaimResponse {
	n.t.Helper()
	status, body := n.do("POST", "/v1/claim", nodeToken, pool.ClaimRequest{Template: "default", TTLSeconds: ttl, ClaimRef: ref})
	if status != 200 {
		n.t.Fatalf("claim %s: %d %s", ref, status, body)
	}
	var r pool.ClaimResponse
	if err := json.Unmarshal(body, &r); err != nil || r.ID == "" {
		n.t.Fatalf("claim %s: %q: %v", ref, body, err)
	}
	return r
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
