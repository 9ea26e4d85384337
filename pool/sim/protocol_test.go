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
		{"not json", nodeToken, "{", 400},
		{"no template", nodeToken, pool.ClaimRequest{}, 400},
		{"unknown template", nodeToken, pool.ClaimRequest{Template: "x"}, 400},
		{"unknown size axis", nodeToken, pool.ClaimRequest{Template: "default", Size: "huge"}, 400},
		{"negative ttl", nodeToken, pool.ClaimRequest{Template: "default", TTLSeconds: -1}, 400},
		{"root token", rootToken, pool.ClaimRequest{Template: "default"}, 200},
		{"node token", nodeToken, pool.ClaimRequest{Template: "default"}, 200},
	} {
		status, body := n.do("POST", "/v1/claim", tc.token, tc.body)
		if status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.want)
		}
		if status >= 400 {
			var eb pool.ErrorBody
			if json.Unmarshal(body, &eb) != nil || eb.Error == "" {
				t.Errorf("%s: error body %q is not {\"error\": ...}", tc.name, body)
			}
		}
	}
}

// The token matrix of the package doc, for the single-row GET and release.
func TestTokenMatrixForGetAndRelease(t *testing.T) {
	n := newNode(t, sim.Config{})
	a, b := n.claim("ns/a", 60), n.claim("ns/b", 60)
	path := "/v1/sandboxes/" + a.ID

	status, body := n.do("GET", path, rootToken, nil)
	var row pool.Sandbox
	if status != 200 || json.Unmarshal(body, &row) != nil || row.Token != a.Token {
		t.Errorf("root get: %d, token present=%v; want the row with its token", status, row.Token != "")
	}
	status, body = n.do("GET", path, nodeToken, nil)
	if status != 200 || strings.Contains(string(body), a.Token) || strings.Contains(string(body), `"token"`) {
		t.Errorf("node get: %d %s; want the row without a token", status, body)
	}
	if status, _ := n.do("GET", path, a.Token, nil); status != 401 {
		t.Errorf("sandbox-token get: %d, want 401", status)
	}
	if status, _ := n.do("GET", "/v1/sandboxes", a.Token, nil); status != 401 {
		t.Errorf("sandbox-token list: %d, want 401", status)
	}

	release := path + "/release"
	for _, tok := range []string{"", nodeToken, b.Token} {
		if status, _ := n.do("POST", release, tok, nil); status != 401 {
			t.Errorf("release with %s: %d, want 401", map[string]string{"": "no token", nodeToken: "node token", b.Token: "another sandbox's token"}[tok], status)
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
}

func TestListFiltersByClaimRefAndNeverCarriesTokens(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 60)
	n.claim("ns/b", 60)
	status, body := n.do("GET", "/v1/sandboxes?claim_ref=ns%2Fa", nodeToken, nil)
	var l pool.SandboxList
	if status != 200 || json.Unmarshal(body, &l) != nil || len(l.Sandboxes) != 1 || l.Sandboxes[0].ID != a.ID {
		t.Fatalf("list ns/a: %d %s", status, body)
	}
	_, body = n.do("GET", "/v1/sandboxes", rootToken, nil)
	if strings.Contains(string(body), `"token"`) {
		t.Errorf("list carries tokens: %s", body)
	}
}

func TestWrongMethodIs405(t *testing.T) {
	n := newNode(t, sim.Config{})
	if status, _ := n.do("GET", "/v1/claim", nodeToken, nil); status != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/claim: %d", status)
	}
}
