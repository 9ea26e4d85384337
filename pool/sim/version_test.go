package sim_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// since is the first version with each behaviour, as sandboxd's own
// history has it: the oracle the profiles are checked against.
var since = map[string]string{
	"stats": sim.V1, "agent": sim.V1,
	"claim_ref_filter": sim.V2, "token_read": sim.V2, "claimed_at": sim.V2, "renew": sim.V2, "exec": sim.V2, "ports": sim.V2,
	"metadata": sim.V3, "advertise_addr": sim.V3, "passive_relay": sim.V3,
	"tenant_db": sim.V4,
}

func has(version, feature string) bool { return version >= since[feature] } // "V1" < ... < "V5"

// Each profile answers as its version: verbs it lacks are the plain
// router's text 404, fields and filters it lacks are silently ignored,
// and what every version has (root release by id, a tenant's own
// listing) works everywhere.
func TestAPIVersionProfiles(t *testing.T) {
	for _, v := range sim.APIVersions() {
		t.Run(v, func(t *testing.T) {
			n := newNode(t, sim.Config{APIVersion: v})
			mine := n.claimWith(tenantToken, pool.ClaimRequest{Template: "default", ClaimRef: "ns/a", Metadata: map[string]string{"app": "a"}})
			other := n.claimWith(otherToken, pool.ClaimRequest{Template: "default", ClaimRef: "ns/b"})

			verbs := []struct{ feature, method, path string }{
				{"renew", "POST", "/v1/sandboxes/" + mine.ID + "/renew"},
				{"exec", "POST", "/v1/sandboxes/" + mine.ID + "/exec"},
				{"stats", "GET", "/v1/sandboxes/" + mine.ID + "/stats"},
				{"ports", "GET", "/v1/sandboxes/" + mine.ID + "/ports/1"},
				{"agent", "GET", "/v1/sandboxes/" + mine.ID + "/agent"},
			}
			for _, vb := range verbs {
				resp, body := n.send(vb.method, vb.path, rootToken, nil)
				routerAnswer := resp.StatusCode == 404 && string(body) == "404 page not found\n" &&
					strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain")
				if routerAnswer == has(v, vb.feature) {
					t.Errorf("%s %s: %d %q (%s): want the verb %v", vb.method, vb.path, resp.StatusCode, body, resp.Header.Get("Content-Type"), has(v, vb.feature))
				}
			}

			// A tenant lists its own claims only; ?claim_ref= is honoured
			// from V2, ignored before.
			if got := ids(n.list(tenantToken, "")); len(got) != 1 || got[0] != mine.ID {
				t.Errorf("tenant listing %v, want only %s", got, mine.ID)
			}
			want := []string{other.ID}
			if !has(v, "claim_ref_filter") {
				want = sorted(mine.ID, other.ID)
			}
			if got := ids(n.list(rootToken, "?claim_ref=ns%2Fb")); !slices.Equal(got, want) {
				t.Errorf("?claim_ref=ns/b: %v, want %v", got, want)
			}

			// Metadata is kept and filtered from V3; before, it is dropped
			// and the filter ignored, even a malformed one.
			rows := n.list(rootToken, "?metadata=app%3Da")
			var kept map[string]string
			for _, r := range rows {
				if r.ID == mine.ID {
					kept = r.Metadata
				}
			}
			if (kept["app"] == "a") != has(v, "metadata") || (len(rows) == 1) != has(v, "metadata") {
				t.Errorf("?metadata=app=a: %v (metadata %v), want metadata %v", ids(rows), kept, has(v, "metadata"))
			}
			if status, body := n.do("GET", "/v1/sandboxes?metadata=%3D", rootToken, nil); (status == 400) != has(v, "metadata") {
				t.Errorf("?metadata== (empty key): %d %s", status, body)
			}

			// The by-id read has the token from V2.
			_, body := n.send("GET", "/v1/sandboxes/"+mine.ID, rootToken, nil)
			var row pool.Sandbox
			if err := json.Unmarshal(body, &row); err != nil || row.ID != mine.ID {
				t.Fatalf("by-id read: %s", body)
			}
			if (row.Token == mine.Token) != has(v, "token_read") || (row.Token != "" && row.Token != mine.Token) {
				t.Errorf("by-id read token present %v, want %v", row.Token != "", has(v, "token_read"))
			}

			// advertise_addr from V3; "engine":"ch" in keys on V1 only.
			_, info := n.send("GET", "/v1/info", rootToken, nil)
			if strings.Contains(string(info), `"advertise_addr"`) != has(v, "advertise_addr") {
				t.Errorf("info %s: want advertise_addr %v", info, has(v, "advertise_addr"))
			}
			_, list := n.send("GET", "/v1/sandboxes", rootToken, nil)
			for what, doc := range map[string][]byte{"info": info, "list": list} {
				if strings.Contains(string(doc), `"engine":"ch"`) != (v == sim.V1) {
					t.Errorf("%s %s: want engine in keys %v", what, doc, v == sim.V1)
				}
			}

			// Rows carry claimed_at from V2; a V1 row has no age but its
			// deadline, in the listing as in the by-id read.
			for what, doc := range map[string][]byte{"list": list, "by-id read": body} {
				if strings.Contains(string(doc), `"claimed_at"`) != has(v, "claimed_at") {
					t.Errorf("%s %s: want claimed_at %v", what, doc, has(v, "claimed_at"))
				}
			}

			// The root token releases any sandbox by id.
			if status, body := n.do("POST", "/v1/sandboxes/"+other.ID+"/release", rootToken, nil); status != 204 {
				t.Errorf("root release by id: %d %s", status, body)
			}
		})
	}
}

// V1 writes deadlines with nanosecond fractions; later versions with
// milliseconds.
func TestV1DeadlinesCarryNanoseconds(t *testing.T) {
	for _, v := range []string{sim.V1, sim.V2} {
		n := newNode(t, sim.Config{APIVersion: v})
		sub := false
		for range 3 { // all three on a whole millisecond: a 1e-18 chance
			c := n.claimWith(rootToken, pool.ClaimRequest{Template: "default"})
			sub = sub || c.Deadline.Nanosecond()%int(time.Millisecond) != 0
		}
		if sub != (v == sim.V1) {
			t.Errorf("%s: sub-millisecond deadlines %v, want %v", v, sub, v == sim.V1)
		}
	}
}

// Before V3 the ports relay takes only the sandbox's own token: the root
// token is as unknown as any other.
func TestPassiveRootRelayOnlyFromV3(t *testing.T) {
	for _, v := range []string{sim.V2, sim.V3} {
		n := newNode(t, sim.Config{APIVersion: v})
		c := n.claim("ns/p", 60)
		resp, _, _ := n.upgrade(c.ID, rootToken, "1", tcpUpgrade)
		if (resp.StatusCode != 404) != has(v, "passive_relay") {
			t.Errorf("%s: root relay answered %d", v, resp.StatusCode)
		}
	}
}

// The tenant database, its 503 and renew's 403 for a removed tenant are
// V4's; before, a removed tenant's sandbox still renews with its token.
func TestTenantDatabaseOnlyFromV4(t *testing.T) {
	for _, v := range []string{sim.V3, sim.V4} {
		n := newNode(t, sim.Config{APIVersion: v})
		c := n.claim("ns/t", 60)
		n.sim.RemoveTenant(tenantName)
		status, _, body := renew(t, n, c.ID, c.Token, pool.RenewRequest{TTLSeconds: 60})
		if want := map[bool]int{true: 403, false: 200}[has(v, "tenant_db")]; status != want {
			t.Errorf("%s: renew of a removed tenant's sandbox %d %s, want %d", v, status, body, want)
		}
		panicked := func() (p bool) {
			defer func() { p = recover() != nil }()
			n.sim.SetTenantDBDown(true)
			return false
		}()
		if panicked == has(v, "tenant_db") {
			t.Errorf("%s: SetTenantDBDown panicked %v", v, panicked)
		}
		n.sim.SetTenantDBDown(false)
	}
	if _, err := sim.New(sim.Config{RootToken: rootToken, APIVersion: sim.V3, TenantDBDown: true}); err == nil {
		t.Error("TenantDBDown accepted on V3")
	}
}

func TestUnknownAPIVersionIsRefused(t *testing.T) {
	_, err := sim.New(sim.Config{RootToken: rootToken, APIVersion: "V9"})
	if err == nil || !strings.Contains(err.Error(), "V1, V2, V3, V4, V5") {
		t.Fatalf("APIVersion V9: %v", err)
	}
}
