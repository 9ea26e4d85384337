package sim_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// near reports whether got is want within a second (the deadline is taken
// at the end of the claim, after the request was sent).
func near(got, want time.Time) bool {
	d := got.Sub(want)
	return d > -time.Second && d < time.Second
}

// ttl_seconds 0 is five minutes; anything above 24h is granted 24h, not
// refused; the answer's deadline is the grant, as is the row's.
func TestClaimTTLDefaultsToFiveMinutesAndIsCappedAtADay(t *testing.T) {
	n := newNode(t, sim.Config{})
	for _, tc := range []struct {
		ttl  int64
		want time.Duration
	}{
		{0, 5 * time.Minute},
		{90, 90 * time.Second},
		{86400, 24 * time.Hour},
		{86401, 24 * time.Hour},
		{1 << 62, 24 * time.Hour}, // no Duration overflow
	} {
		c := n.claim("", tc.ttl)
		if !near(c.Deadline, time.Now().Add(tc.want)) {
			t.Errorf("ttl_seconds %d: deadline in %v, want %v", tc.ttl, time.Until(c.Deadline).Round(time.Second), tc.want)
		}
		status, body := n.do("GET", "/v1/sandboxes/"+c.ID, rootToken, nil)
		var row pool.Sandbox
		if status != 200 || json.Unmarshal(body, &row) != nil || !row.Deadline.Equal(c.Deadline) {
			t.Errorf("ttl_seconds %d: row deadline %v, the claim's %v", tc.ttl, row.Deadline, c.Deadline)
		}
	}
}

// A shortened MaxTTL caps the default too, and the reaper ends the lease
// at the granted deadline, whatever was asked.
func TestShortMaxTTLIsTheGrantAndTheReaperHonoursIt(t *testing.T) {
	n := newNode(t, sim.Config{MaxTTL: 2 * time.Second, DefaultTTL: time.Hour})
	asked := n.claim("ns/asked-an-hour", 3600)
	dflt := n.claim("ns/default", 0)
	for _, c := range []pool.ClaimResponse{asked, dflt} {
		if !near(c.Deadline, time.Now().Add(2*time.Second)) {
			t.Errorf("deadline in %v, want the 2s cap", time.Until(c.Deadline))
		}
	}
	testkit.WaitFor(t, 5*time.Second, "the capped leases to end", func() bool { return len(n.sim.Sandboxes()) == 0 })
}

// Renew resets the lease to N seconds from now (shorter or longer than
// before), defaults and caps like a claim, and the row and reaper follow.
func TestRenewResetsTheLease(t *testing.T) {
	n := newNode(t, sim.Config{MaxTTL: time.Hour})
	a := n.claim("ns/a", 600)
	for _, tc := range []struct {
		body any
		want time.Duration
	}{
		{pool.RenewRequest{TTLSeconds: 1200}, 20 * time.Minute},
		{pool.RenewRequest{TTLSeconds: 30}, 30 * time.Second}, // shorter is allowed: a reset, not an extension
		{nil, 5 * time.Minute},                                // no body is ttl 0
		{"{}", 5 * time.Minute},
		{pool.RenewRequest{TTLSeconds: 7200}, time.Hour}, // capped
	} {
		status, r, body := renew(t, n, a.ID, a.Token, tc.body)
		if status != 200 || !near(r.Deadline, time.Now().Add(tc.want)) {
			t.Errorf("renew %v: %d %s, want a deadline in %v", tc.body, status, body, tc.want)
			continue
		}
		if got := n.sim.Sandboxes()[0].Deadline; !got.Equal(r.Deadline) {
			t.Errorf("renew %v: row deadline %v, answered %v", tc.body, got, r.Deadline)
		}
	}
	if status, _, _ := renew(t, n, a.ID, rootToken, pool.RenewRequest{TTLSeconds: 1}); status != 200 {
		t.Errorf("root renew: %d, want 200", status)
	}
	testkit.WaitFor(t, 5*time.Second, "the renewed 1s lease to end", func() bool { return len(n.sim.Sandboxes()) == 0 })
	if c := n.sim.Counters(); c["renew"] != 6 || c["renew_ok"] != 6 {
		t.Errorf("counters %v, want renew 6, renew_ok 6", c)
	}
}

func TestRenewErrors(t *testing.T) {
	n := newNode(t, sim.Config{})
	a, b := n.claim("ns/a", 600), n.claim("ns/b", 600)
	before := n.sim.Sandboxes()
	for _, tc := range []struct {
		name, id, token string
		body            any
		want            int
	}{
		{"no token", a.ID, "", nil, 401},
		{"malformed body", a.ID, a.Token, "{", 400},
		{"negative ttl", a.ID, a.Token, pool.RenewRequest{TTLSeconds: -5}, 400},
		{"unknown id", "sb_0000000000000000", a.Token, nil, 404},
		{"another sandbox's token", a.ID, b.Token, nil, 404},
		{"tenant token", a.ID, tenantToken, nil, 404},
	} {
		status, _, body := renew(t, n, tc.id, tc.token, tc.body)
		if status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.want)
		}
		errorBody(t, tc.name, body)
	}
	if after := n.sim.Sandboxes(); !after[0].Deadline.Equal(before[0].Deadline) {
		t.Errorf("a refused renew moved the deadline from %v to %v", before[0].Deadline, after[0].Deadline)
	}
	if !n.sim.Archive(a.ID) {
		t.Fatal("Archive: no such sandbox")
	}
	status, _, body := renew(t, n, a.ID, a.Token, nil)
	if status != 409 || !strings.Contains(string(body), "archived") {
		t.Errorf("renew of an archived sandbox: %d %s, want 409", status, body)
	}
	if status, _, _ := renew(t, n, a.ID, b.Token, nil); status != 404 {
		t.Errorf("wrong-token renew of an archived sandbox: %d, want 404 (the token is checked first)", status)
	}
}

// An archived sandbox stays listed and is never reaped, and gives up its
// slot.
func TestArchivedSandboxStaysAndFreesItsSlot(t *testing.T) {
	n := newNode(t, sim.Config{MaxClaims: 1})
	a := n.claim("ns/a", 1)
	n.sim.Archive(a.ID)
	b := n.claim("ns/b", 1)
	testkit.WaitFor(t, 5*time.Second, "the live 1s lease to end", func() bool { return len(n.sim.Sandboxes()) == 1 })
	got := n.list(rootToken, "")
	if len(got) != 1 || got[0].ID != a.ID || !got[0].Archived {
		t.Fatalf("rows %v, want only the archived %s (and %s reaped)", got, a.ID, b.ID)
	}
	if info := n.info(); info.Archived != 1 || info.Claimed != 0 {
		t.Errorf("info claimed %d archived %d, want 0 and 1", info.Claimed, info.Archived)
	}
}
