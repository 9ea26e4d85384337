package sim_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

var peers = []string{"10.0.0.6:7777", "10.0.0.7:7777"}

// claimAnswer is one claim's 200 answer: an id or a redirect.
func claimAnswer(t *testing.T, n *node, req pool.ClaimRequest) (int, pool.ClaimResponse) {
	t.Helper()
	status, body := n.do("POST", "/v1/claim", tenantToken, req)
	var r pool.ClaimResponse
	if status == 200 {
		if json.Unmarshal(body, &r) != nil || (r.ID == "") == (len(r.Redirect) == 0) {
			t.Fatalf("claim: 200 %s: want exactly one of id and redirect", body)
		}
	}
	return status, r
}

// A single node (the default) never redirects: a warm miss boots cold.
func TestSingleNodeBootsAWarmMissCold(t *testing.T) {
	n := newNode(t, sim.Config{Pools: map[pool.Key]int{defaultKey: 0}})
	if status, r := claimAnswer(t, n, pool.ClaimRequest{Template: "default"}); status != 200 || r.ID == "" {
		t.Errorf("warm miss on a single node: %d %v, want a cold-booted VM", status, r)
	}
	if info := n.info(); len(info.Peers) != 0 {
		t.Errorf("a single node reports peers %v", info.Peers)
	}
}

// On a meshed node a warm miss is a redirect to the peers, and no VM;
// with no_redirect the node boots it itself.
func TestMeshRedirectsAWarmMissUnlessNoRedirect(t *testing.T) {
	n := newNode(t, sim.Config{Mesh: true, Redirect: peers, RefillDelay: time.Hour, Pools: map[pool.Key]int{defaultKey: 1}})
	if _, r := claimAnswer(t, n, pool.ClaimRequest{Template: "default"}); r.ID == "" {
		t.Fatal("the warm VM was redirected")
	}
	status, r := claimAnswer(t, n, pool.ClaimRequest{Template: "default"})
	if status != 200 || !slices.Equal(r.Redirect, peers) {
		t.Fatalf("warm miss: %d %v, want a redirect to %v", status, r, peers)
	}
	if len(n.sim.Sandboxes()) != 1 {
		t.Error("a redirected claim made a VM")
	}
	if status, r := claimAnswer(t, n, pool.ClaimRequest{Template: "default", NoRedirect: true}); status != 200 || r.ID == "" {
		t.Errorf("warm miss with no_redirect: %d %v, want a local VM", status, r)
	}
	if c := n.sim.Counters(); c["claim_ok"] != 2 || c["claim_redirect"] != 1 {
		t.Errorf("counters %v", c)
	}
	if info := n.info(); !slices.Equal(info.Peers, peers) {
		t.Errorf("info peers %v, want %v", info.Peers, peers)
	}
	n.sim.SetMesh(false)
	if _, r := claimAnswer(t, n, pool.ClaimRequest{Template: "default"}); r.ID == "" {
		t.Error("SetMesh(false): still redirecting")
	}
}

// A template a peer owns is redirected; with no_redirect it is cloned here.
// Off the mesh it is just unknown.
func TestMeshRedirectsAPeersTemplate(t *testing.T) {
	n := newNode(t, sim.Config{Mesh: true, Redirect: peers, PeerTemplates: []string{"py"}})
	if _, r := claimAnswer(t, n, pool.ClaimRequest{Template: "py"}); !slices.Equal(r.Redirect, peers) {
		t.Errorf("peer template: %v, want a redirect", r)
	}
	_, r := claimAnswer(t, n, pool.ClaimRequest{Template: "py", NoRedirect: true, ClaimRef: "ns/py"})
	if r.ID == "" {
		t.Fatalf("peer template with no_redirect: %v, want a local clone", r)
	}
	if got := n.list(tenantToken, "?claim_ref=ns%2Fpy"); len(got) != 1 || got[0].Key.Template != "py" {
		t.Errorf("rows %v, want the py clone", got)
	}
	if status, _ := claimAnswer(t, n, pool.ClaimRequest{Template: "rb"}); status != 400 {
		t.Errorf("a template nobody owns: %d, want 400", status)
	}
	single := newNode(t, sim.Config{PeerTemplates: []string{"py"}})
	if status, _ := claimAnswer(t, single, pool.ClaimRequest{Template: "py"}); status != 400 {
		t.Errorf("a peer template on a single node: %d, want 400", status)
	}
}

// A meshed node at max_claims redirects (a peer has capacity); with
// no_redirect it is a 429, without Retry-After.
func TestMeshAtMaxClaimsRedirectsOr429s(t *testing.T) {
	n := newNode(t, sim.Config{Mesh: true, Redirect: peers, MaxClaims: 1})
	n.claim("ns/a", 60)
	if _, r := claimAnswer(t, n, pool.ClaimRequest{Template: "default"}); !slices.Equal(r.Redirect, peers) {
		t.Errorf("at max_claims: %v, want a redirect", r)
	}
	resp, body := n.send("POST", "/v1/claim", tenantToken, pool.ClaimRequest{Template: "default", NoRedirect: true})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "" {
		t.Errorf("at max_claims with no_redirect: %d Retry-After=%q %s, want 429 without it", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if info := n.info(); !info.AtCapacity || info.AtCapacityReason == "" {
		t.Errorf("info at_capacity %v %q, want true with a reason", info.AtCapacity, info.AtCapacityReason)
	}
	n.sim.SetCapacity(sim.Capacity429) // the peers are full too
	if status, _ := claimAnswer(t, n, pool.ClaimRequest{Template: "default"}); status != 429 {
		t.Errorf("capacity 429 on a meshed node: %d, want 429", status)
	}
}

func TestDrainingNodeAnswers429(t *testing.T) {
	n := newNode(t, sim.Config{Mesh: true})
	n.sim.SetDraining(true)
	resp, _ := n.send("POST", "/v1/claim", tenantToken, pool.ClaimRequest{Template: "default"})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "" {
		t.Errorf("draining: %d Retry-After=%q, want 429 without it", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if !n.info().Draining {
		t.Error("info does not report draining")
	}
	n.sim.SetDraining(false)
	n.claim("ns/after", 60)
}
