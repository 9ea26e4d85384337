package sim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// A tenant lists only the rows it claimed, each carrying its name; root
// lists every row, its own without a tenant.
func TestTenantListsOnlyItsOwnClaims(t *testing.T) {
	n := newNode(t, sim.Config{})
	mine := n.claim("ns/mine", 60)
	theirs := n.claimWith(otherToken, pool.ClaimRequest{Template: "default", ClaimRef: "ns/theirs"})
	roots := n.claimWith(rootToken, pool.ClaimRequest{Template: "default", ClaimRef: "ns/root"})

	got := n.list(tenantToken, "")
	if len(got) != 1 || got[0].ID != mine.ID || got[0].Tenant != tenantName {
		t.Errorf("tenant %s lists %v, want only %s with its tenant", tenantName, got, mine.ID)
	}
	if got := n.list(otherToken, "?claim_ref=ns%2Fmine"); len(got) != 0 {
		t.Errorf("tenant %s found another tenant's claim by claim_ref: %v", otherName, got)
	}
	all := n.list(rootToken, "")
	if !slices.Equal(ids(all), sorted(mine.ID, theirs.ID, roots.ID)) {
		t.Fatalf("root lists %v, want all three", all)
	}
	tenants := map[string]string{}
	for _, r := range all {
		tenants[r.ID] = r.Tenant
	}
	if tenants[mine.ID] != tenantName || tenants[theirs.ID] != otherName || tenants[roots.ID] != "" {
		t.Errorf("row tenants %v", tenants)
	}
}

// A tenant releases and renews with the sandbox token; its own tenant
// token is not a sandbox credential.
func TestTenantReleasesWithTheSandboxToken(t *testing.T) {
	n := newNode(t, sim.Config{})
	a := n.claim("ns/a", 60)
	if status, _ := n.do("POST", "/v1/sandboxes/"+a.ID+"/renew", tenantToken, nil); status != 404 {
		t.Errorf("renew with the tenant token: %d, want 404", status)
	}
	if status, _ := n.do("POST", "/v1/sandboxes/"+a.ID+"/renew", a.Token, nil); status != 200 {
		t.Errorf("renew with the sandbox token: %d, want 200", status)
	}
	if status, _ := n.do("POST", "/v1/sandboxes/"+a.ID+"/release", a.Token, nil); status != 204 {
		t.Errorf("release with the sandbox token: %d, want 204", status)
	}
}

// Each tenant is capped on its own; the cap is a 429 without Retry-After,
// and the root token is not a tenant.
func TestTenantCapIs429WithoutRetryAfter(t *testing.T) {
	n := newNode(t, sim.Config{TenantMaxClaims: 2, Mesh: true, Pools: map[pool.Key]int{defaultKey: 8}})
	a := n.claim("ns/a", 60)
	n.claim("ns/b", 60)
	resp, body := n.send("POST", "/v1/claim", tenantToken, pool.ClaimRequest{Template: "default"})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("third claim: %d Retry-After=%q %s, want 429 without Retry-After (never a redirect)", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	errorBody(t, "tenant cap", body)
	n.claimWith(otherToken, pool.ClaimRequest{Template: "default"})
	n.claimWith(rootToken, pool.ClaimRequest{Template: "default"})
	n.do("POST", "/v1/sandboxes/"+a.ID+"/release", a.Token, nil)
	n.claim("ns/c", 60) // the released slot is the tenant's again
}

// A removed tenant's token is unknown from then on; its sandboxes stay,
// may be released, and their renew is a 403.
func TestRemovedTenant(t *testing.T) {
	n := newNode(t, sim.Config{})
	a, b := n.claim("ns/a", 60), n.claim("ns/b", 60)
	if !n.sim.RemoveTenant(tenantName) || n.sim.RemoveTenant(tenantName) {
		t.Fatal("RemoveTenant: want true once, then false")
	}
	if status, _ := n.do("GET", "/v1/sandboxes", tenantToken, nil); status != 401 {
		t.Errorf("list with the removed tenant's token: %d, want 401", status)
	}
	for _, tok := range []string{a.Token, rootToken} {
		status, body := n.do("POST", "/v1/sandboxes/"+a.ID+"/renew", tok, nil)
		if status != 403 {
			t.Errorf("renew of a removed tenant's sandbox: %d %s, want 403", status, body)
		}
	}
	if status, _ := n.do("POST", "/v1/sandboxes/"+b.ID+"/renew", "wrong", nil); status != 404 {
		t.Errorf("renew with a wrong token: %d, want 404 before the tenant is looked at", status)
	}
	if status, _ := n.do("POST", "/v1/sandboxes/"+a.ID+"/release", a.Token, nil); status != 204 {
		t.Errorf("release of a removed tenant's sandbox: %d, want 204", status)
	}
	n.sim.AddTenant("new-acme-token", tenantName)
	if status, _ := n.do("POST", "/v1/sandboxes/"+b.ID+"/renew", b.Token, nil); status != 200 {
		t.Errorf("renew once the tenant is back: %d, want 200", status)
	}
	if got := n.list("new-acme-token", ""); len(got) != 1 || got[0].ID != b.ID {
		t.Errorf("the re-added tenant lists %v, want %s", got, b.ID)
	}
}

// While the tenant database is down, anything that needs it is 503 with
// Retry-After; the root token and sandbox-token releases go on working.
func TestTenantDBDownIs503WithRetryAfter(t *testing.T) {
	n := newNode(t, sim.Config{TenantDBRetryAfter: 3 * time.Second})
	a := n.claim("ns/a", 60)
	n.sim.SetTenantDBDown(true)
	for _, tc := range []struct {
		method, path, token string
		body                any
	}{
		{"POST", "/v1/claim", tenantToken, pool.ClaimRequest{Template: "default"}},
		{"POST", "/v1/claim", "unknown", pool.ClaimRequest{Template: "default"}},
		{"GET", "/v1/sandboxes", tenantToken, nil},
		{"GET", "/v1/info", tenantToken, nil},
		{"POST", "/v1/sandboxes/" + a.ID + "/renew", a.Token, nil},
	} {
		resp, body := n.send(tc.method, tc.path, tc.token, tc.body)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "3" {
			t.Errorf("%s %s: %d Retry-After=%q %s, want 503 and 3", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		errorBody(t, tc.path, body)
	}
	if status, _ := n.do("POST", "/v1/claim", "", pool.ClaimRequest{Template: "default"}); status != 401 {
		t.Errorf("claim without a token: %d, want 401 (no database needed)", status)
	}
	n.claimWith(rootToken, pool.ClaimRequest{Template: "default"})
	n.list(rootToken, "")
	if status, _ := n.do("POST", "/v1/sandboxes/"+a.ID+"/release", a.Token, nil); status != 204 {
		t.Errorf("sandbox-token release: %d, want 204", status)
	}
	n.sim.SetTenantDBDown(false)
	n.claim("ns/after", 60)
}

func TestTenantDBDownFromConfigDefaultsToOneSecond(t *testing.T) {
	n := newNode(t, sim.Config{TenantDBDown: true})
	resp, _ := n.send("GET", "/v1/sandboxes", tenantToken, nil)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("list: %d Retry-After=%q, want 503 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// NodeToken, from before tenants, is a tenant token of NodeTenant.
func TestNodeTokenIsATenant(t *testing.T) {
	n := newNode(t, sim.Config{NodeToken: "legacy-node-token"})
	c := n.claimWith("legacy-node-token", pool.ClaimRequest{Template: "default"})
	if got := n.list("legacy-node-token", ""); len(got) != 1 || got[0].ID != c.ID || got[0].Tenant != sim.NodeTenant {
		t.Errorf("node-token list %v, want its claim with tenant %q", got, sim.NodeTenant)
	}
	if status, _ := n.do("GET", "/v1/info", "legacy-node-token", nil); status != 403 {
		t.Errorf("node-token info: %d, want 403", status)
	}
}
