package sim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestClaimValidatesTokenThenBody(t *testing.T) {
	n := newNode(t, sim.Config{})
	for _, tc := range []struct {
		name, token string
		body        any
		want        int
	}{
		{"no token", "", pool.ClaimRequest{Template: "default"}, 401},
		{"bad token before bad body", "nope", "{", 401},
		{"not json", tenantToken, "{", 400},
		{"empty body", tenantToken, "", 400},
		{"no template", tenantToken, pool.ClaimRequest{}, 400},
		{"unknown template", tenantToken, pool.ClaimRequest{Template: "x"}, 400},
		{"unknown size axis", tenantToken, pool.ClaimRequest{Template: "default", Size: "huge"}, 400},
		{"negative ttl", tenantToken, pool.ClaimRequest{Template: "default", TTLSeconds: -1}, 400},
		{"root token", rootToken, pool.ClaimRequest{Template: "default"}, 200},
		{"tenant token", tenantToken, pool.ClaimRequest{Template: "default"}, 200},
		{"default axes named", tenantToken, pool.ClaimRequest{Template: "default", Net: "none", Size: "small"}, 200},
	} {
		status, body := n.do("POST", "/v1/claim", tc.token, tc.body)
		if status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.want)
		}
		if status >= 400 {
			errorBody(t, tc.name, body)
		}
	}
}

// Bodies are capped at 1 MiB: one byte over is a 400, one under is read.
func TestClaimBodyIsCappedAtOneMiB(t *testing.T) {
	n := newNode(t, sim.Config{})
	padded := func(size int) string {
		head := `{"template":"default","claim_ref":"`
		tail := `"}`
		return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
	}
	status, body := n.do("POST", "/v1/claim", tenantToken, padded(1<<20+1))
	if status != 400 || !strings.Contains(string(body), "invalid request body") {
		t.Errorf("1 MiB + 1: %d %s, want 400 invalid request body", status, body)
	}
	if status, body := n.do("POST", "/v1/claim", tenantToken, padded(1<<20)); status != 200 {
		t.Errorf("exactly 1 MiB: %d %.200s, want 200", status, body)
	}
}

// The token matrix of the package doc for the sandbox-scoped calls: a
// wrong token is indistinguishable from an unknown id.
func TestTokenMatrixForGetAndRelease(t *testing.T) {
	n := newNode(t, sim.Config{})
	a, b := n.claim("ns/a", 60), n.claim("ns/b", 60)
	path := "/v1/sandboxes/" + a.ID

	status, body := n.do("GET", path, rootToken, nil)
	var row pool.Sandbox
	if status != 200 || json.Unmarshal(body, &row) != nil || row.Token != a.Token || row.ID != a.ID {
		t.Errorf("root get: %d, token present=%v; want the row with its token", status, row.Token != "")
	}
	for who, tok := range map[string]string{"tenant": tenantToken, "another tenant": otherToken} {
		status, body := n.do("GET", path, tok, nil)
		if status != 403 || strings.Contains(string(body), a.Token) {
			t.Errorf("%s get: %d %s; want 403 without the token", who, status, body)
		}
		errorBody(t, who+" get", body)
	}
	if status, _ := n.do("GET", path, a.Token, nil); status != 401 {
		t.Errorf("sandbox-token get: %d, want 401", status)
	}
	if status, _ := n.do("GET", "/v1/sandboxes", a.Token, nil); status != 401 {
		t.Errorf("sandbox-token list: %d, want 401", status)
	}
	if status, _ := n.do("POST", "/v1/claim", a.Token, pool.ClaimRequest{Template: "default"}); status != 401 {
		t.Errorf("sandbox-token claim: %d, want 401", status)
	}
	if status, _ := n.do("GET", "/v1/sandboxes/sb_0000000000000000", rootToken, nil); status != 404 {
		t.Errorf("root get of an unknown id: %d, want 404", status)
	}

	release := path + "/release"
	if status, _ := n.do("POST", release, "", nil); status != 401 {
		t.Errorf("release without a token: %d, want 401", status)
	}
	_, unknownBody := n.do("POST", "/v1/sandboxes/sb_0000000000000000/release", b.Token, nil)
	for who, tok := range map[string]string{"tenant": tenantToken, "another sandbox's": b.Token, "garbage": "zzz"} {
		status, body := n.do("POST", release, tok, nil)
		if status != 404 {
			t.Errorf("release with the %s token: %d, want 404", who, status)
		}
		if strings.Replace(string(body), a.ID, "sb_0000000000000000", 1) != string(unknownBody) {
			t.Errorf("release with the %s token answers %s, an unknown id %s: they must not differ", who, body, unknownBody)
		}
	}
	if status, _ := n.do("POST", release, a.Token, nil); status != 204 {
		t.Errorf("release with its own token: %d, want 204", status)
	}
	if status, _ := n.do("POST", release, a.Token, nil); status != 404 {
		t.Errorf("second release: %d, want 404 (gone)", status)
	}
	if status, _ := n.do("POST", "/v1/sandboxes/"+b.ID+"/release", rootToken, nil); status != 204 {
		t.Errorf("root release of any sandbox: %d, want 204", status)
	}
	if c := n.sim.Counters(); c["release_ok"] != 2 || c["release_notfound"] != 5 {
		t.Errorf("counters %v, want release_ok 2, release_notfound 5", c)
	}
}

// The operator surfaces: root yes, a tenant 403, an unknown token 401.
func TestOperatorSurfacesAreRootOnly(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 60)
	for _, path := range []string{"/v1/info", "/v1/sandboxes/" + a.ID, "/v1/sandboxes/" + a.ID + "/stats", "/metrics"} {
		for tok, want := range map[string]int{rootToken: 200, tenantToken: 403, "unknown": 401, "": 401} {
			status, body := n.do("GET", path, tok, nil)
			if status != want {
				t.Errorf("GET %s with %q: %d %s, want %d", path, tok, status, body, want)
			}
			if want >= 400 {
				errorBody(t, path, body)
			}
		}
	}
	status, body := n.do("GET", "/v1/sandboxes/"+a.ID+"/stats", rootToken, nil)
	if status != 200 || !strings.Contains(string(body), `"id":"`+a.ID+`"`) || !strings.Contains(string(body), `"cpu_count":1`) {
		t.Errorf("stats: %d %s", status, body)
	}
	if status, _ := n.do("GET", "/v1/sandboxes/sb_0000000000000000/stats", rootToken, nil); status != 404 {
		t.Errorf("stats of an unknown id: %d, want 404", status)
	}
}

func TestHealthzNeedsNoToken(t *testing.T) {
	n := newNode(t, sim.Config{TenantDBDown: true, Draining: true})
	if status, body := n.do("GET", "/healthz", "", nil); status != 200 || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("/healthz: %d %q, want 200 ok", status, body)
	}
}

// Rows are the index shape: no token in a listing, no owner_addr anywhere,
// and the key with the server's default axes.
func TestRowsCarryNeitherTokenNorOwnerAddr(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 60)
	_, list := n.do("GET", "/v1/sandboxes", rootToken, nil)
	_, one := n.do("GET", "/v1/sandboxes/"+a.ID, rootToken, nil)
	for what, body := range map[string][]byte{"list": list, "get": one} {
		if strings.Contains(string(body), "owner_addr") {
			t.Errorf("%s carries owner_addr: %s", what, body)
		}
	}
	if strings.Contains(string(list), `"token"`) {
		t.Errorf("list carries tokens: %s", list)
	}
	var row pool.Sandbox
	if json.Unmarshal(one, &row) != nil || row.Key != fullKey || row.Tenant != tenantName || row.ClaimRef != "ns/a" ||
		row.ClaimedAt == nil || row.CPUCount == 0 || row.MemTotalBytes == 0 {
		t.Errorf("row %s: want key %v, tenant %s, claim_ref, claimed_at and the machine shape", one, fullKey, tenantName)
	}
}

func TestListFiltersByClaimRef(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 60)
	n.claim("ns/b", 60)
	n.claim("ns/a-longer", 60)
	if got := n.list(tenantToken, "?claim_ref=ns%2Fa"); len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("list ns/a: %v, want exactly %s (the match is exact)", got, a.ID)
	}
	if got := n.list(tenantToken, "?claim_ref=ns%2Fnone"); len(got) != 0 {
		t.Errorf("list of an unknown claim_ref: %v", got)
	}
}

func TestWrongMethodIs405(t *testing.T) {
	n := newNode(t, sim.Config{})
	if status, _ := n.do("GET", "/v1/claim", tenantToken, nil); status != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/claim: %d", status)
	}
	if status, _ := n.do("GET", "/v1/sandboxes/x/renew", tenantToken, nil); status != http.StatusMethodNotAllowed {
		t.Errorf("GET renew: %d", status)
	}
}
