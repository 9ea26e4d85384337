package pool_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
)

// wantFeatures is sandboxd's version history as the feature table has it,
// written out independently of the emulator's own table: stats and the
// agent relay answer from V1; renew, exec, ports, the claim_ref filter and
// the token on the by-id read came with V2, metadata with V3. Stats and
// the token read are root only.
func wantFeatures(version string, kind pool.TokenKind) pool.Features {
	v2, v3, root := version >= sim.V2, version >= sim.V3, kind == pool.TokenRoot
	return pool.Features{
		Token: kind, Metadata: v3, ClaimRefFilter: v2, TokenRead: v2 && root,
		Renew: v2, Exec: v2, Ports: v2, Stats: root, Agent: true,
	}
}

// Detect gives the table's answer for every version, with the root and a
// tenant token, on an empty node (where the claim_ref probe proves nothing
// and the other tells decide) and on one with rows (where it is decisive).
// It claims, releases and renews nothing, and changes no row.
func TestDetectFindsEachAPIVersionsFeatures(t *testing.T) {
	for _, v := range sim.APIVersions() {
		for _, rows := range []bool{false, true} {
			name := v + "/empty"
			if rows {
				name = v + "/rows"
			}
			t.Run(name, func(t *testing.T) {
				h := newHarness(t, sim.Config{APIVersion: v})
				if rows {
					h.claim("ns/a", 60)
					h.claim("ns/b", 60)
				}
				before := h.sim.Sandboxes()
				counts := h.sim.Counters()
				for _, tc := range []struct {
					c    *pool.Client
					kind pool.TokenKind
				}{{h.root, pool.TokenRoot}, {h.node, pool.TokenTenant}} {
					got, err := tc.c.Detect(ctx(t))
					if h.err(err) != nil {
						t.Fatalf("%s Detect: %v", tc.kind, err)
					}
					if want := wantFeatures(v, tc.kind); got != want {
						t.Errorf("%s Detect:\n got %v\nwant %v", tc.kind, got, want)
					}
					if tc.c.Tenant() != (tc.kind == pool.TokenTenant) {
						t.Errorf("%s: Tenant() = %v after Detect", tc.kind, tc.c.Tenant())
					}
				}
				after := h.sim.Counters()
				// The verb probes reach the handlers (the request counters
				// count them), but none claims, releases or renews.
				for _, c := range []string{"claim", "claim_ok", "release", "release_ok", "renew_ok"} {
					if after[c] != counts[c] {
						t.Errorf("Detect changed counter %s: %d -> %d", c, counts[c], after[c])
					}
				}
				if now := h.sim.Sandboxes(); !slices.EqualFunc(before, now, func(a, b pool.Sandbox) bool {
					return a.ID == b.ID && a.Deadline.Equal(b.Deadline) && a.Hibernated == b.Hibernated
				}) {
					t.Errorf("Detect changed the index: %v -> %v", before, now)
				}
			})
		}
	}
}

// A verb's route is told from its absence by who answers: the handler's
// JSON error, or the router's text 404. An agent relay in front of the
// emulator is found; without it, it is not.
func TestDetectFindsAnAgentRelay(t *testing.T) {
	e := simtest.Start(t, sim.Config{RootToken: rootToken, Pools: map[pool.Key]int{defaultKey: 1}}, simtest.Front(func(s *sim.Server) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("/", s.Handler())
		mux.HandleFunc("GET /v1/sandboxes/{id}/agent", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"unknown sandbox"}`))
		})
		return mux
	}))
	c := e.Client(t, pool.ClientOptions{Token: rootToken, Retry: fastRetry})
	got, err := c.Detect(ctx(t))
	if err != nil || !got.Agent || !got.Renew {
		t.Fatalf("Detect = %v, %v: want agent and renew", got, err)
	}
}

// An answer that is neither a handler's nor a router's is no answer: a
// broken connection, or a status no router gives, fails Detect rather than
// reading as "no such verb".
func TestDetectFailsOnAnInconclusiveAnswer(t *testing.T) {
	h := newHarness(t, sim.Config{})
	h.sim.InjectFault(sim.Fault{Verb: "renew", Mode: "reset"})
	_, err := h.root.Detect(ctx(t))
	if h.err(err) == nil || !strings.Contains(err.Error(), "renew") {
		t.Fatalf("Detect with renew's connection broken: %v", err)
	}
	for status, body := range map[int]string{
		http.StatusTeapot:       "short and stout",
		http.StatusUnauthorized: `{"error":"bad token"}`,
	} {
		if f, err := stub(t, status, body).Detect(ctx(t)); err == nil {
			t.Errorf("Detect accepted %d for /v1/info: %v", status, f)
		}
	}
}
