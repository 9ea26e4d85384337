package pool_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestListReturnsAllOrFiltersByClaimRef(t *testing.T) {
	h := newHarness(t, sim.Config{})
	a := h.claim("ns/a", 60)
	h.claim("ns/b", 60)

	all, err := h.node.List(ctx(t), pool.ListOptions{})
	if h.err(err) != nil || len(all) != 2 {
		t.Fatalf("list all: %d rows, %v", len(all), err)
	}
	rows, err := h.node.List(ctx(t), pool.ListOptions{ClaimRef: "ns/a"})
	if h.err(err) != nil || len(rows) != 1 {
		t.Fatalf("list ns/a: %d rows, %v", len(rows), err)
	}
	r := rows[0]
	// sandboxd fills the axes the claim left empty with its defaults.
	want := pool.Key{Template: defaultKey.Template, Net: "none", Size: "small"}
	if r.ID != a.ID || r.ClaimRef != "ns/a" || r.Key != want || r.ClaimedAt == nil || !r.Deadline.Equal(a.Deadline) {
		t.Errorf("row %+v does not match claim %v", r, a)
	}
	for _, r := range all {
		if r.Token != "" {
			t.Errorf("list row %s carries a token", r.ID)
		}
	}
}

func TestListOfNothingIsEmptyNotNil(t *testing.T) {
	h := newHarness(t, sim.Config{})
	rows, err := h.node.List(ctx(t), pool.ListOptions{ClaimRef: "ns/none"})
	if h.err(err) != nil || rows == nil || len(rows) != 0 {
		t.Fatalf("rows=%v (nil=%v) err=%v; want a non-nil empty slice", rows, rows == nil, err)
	}
}

func TestGetWithRootTokenCarriesSandboxToken(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.claim("ns/a", 60)
	row, err := h.root.Get(ctx(t), c.ID)
	if h.err(err) != nil {
		t.Fatal(err)
	}
	if row.ID != c.ID || row.Token != c.Token || row.ClaimRef != "ns/a" {
		t.Errorf("root get: id %s claim_ref %s token matches=%v", row.ID, row.ClaimRef, row.Token == c.Token)
	}
}

// GET /v1/sandboxes/{id} and /v1/info are root only: a tenant token is
// answered 403, which is never retried and teaches the client its kind.
func TestTenantTokenIsForbiddenOnOperatorSurfacesAndNotRetried(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.claim("ns/a", 60)
	if h.node.Tenant() {
		t.Fatal("Tenant() before any root-only call was answered")
	}
	if _, err := h.node.Get(ctx(t), c.ID); !errors.Is(h.err(err), pool.ErrForbidden) {
		t.Fatalf("tenant get: %v, want ErrForbidden", err)
	}
	if !h.node.Tenant() {
		t.Error("a 403 on get did not mark the token as a tenant's")
	}
	if _, err := h.node.Info(ctx(t)); !errors.Is(h.err(err), pool.ErrForbidden) {
		t.Fatalf("tenant info: %v, want ErrForbidden", err)
	}
	if n, m := h.count("get"), h.count("info"); n != 1 || m != 1 {
		t.Errorf("gets %d infos %d sent, want 1 each: a 403 is final", n, m)
	}
	if _, err := h.root.Info(ctx(t)); h.err(err) != nil || h.root.Tenant() {
		t.Errorf("root info: %v, tenant=%v", err, h.root.Tenant())
	}
}

func TestGetOfUnknownIDIsNotFoundAndNotRetried(t *testing.T) {
	h := newHarness(t, sim.Config{})
	_, err := h.root.Get(ctx(t), "sb_gone")
	h.err(err)
	if !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if n := h.count("get"); n != 1 {
		t.Errorf("gets sent = %d, want 1", n)
	}
}

func TestInfoReportsPoolsClaimedAndCounters(t *testing.T) {
	h := newHarness(t, sim.Config{Pools: map[pool.Key]int{
		defaultKey: 3,
		{Template: "py", Net: "bridge", Size: "small"}: 1,
	}})
	h.claim("ns/a", 60)
	info, err := h.root.Info(ctx(t))
	if h.err(err) != nil {
		t.Fatal(err)
	}
	if info.Claimed != 1 || len(info.Pools) != 2 {
		t.Fatalf("info %+v: want claimed 1 and 2 pools", info)
	}
	if p := info.Pools[0]; p.Key.Template != defaultKey.Template || p.Target != 3 {
		t.Errorf("pools sorted by key: first %+v", p)
	}
	if info.Counters["claim_ok"] != 1 || info.Counters["info"] != 1 {
		t.Errorf("counters %v", info.Counters)
	}
}

func TestReadsWithBadTokenAre401(t *testing.T) {
	h := newHarness(t, sim.Config{})
	bad := h.client("not-a-valid-token", nil)
	_, err := bad.List(ctx(t), pool.ListOptions{})
	assertStatus(t, h.err(err), http.StatusUnauthorized)
	_, err = bad.Get(ctx(t), "sb_x")
	assertStatus(t, h.err(err), http.StatusUnauthorized)
	_, err = bad.Info(ctx(t))
	assertStatus(t, h.err(err), http.StatusUnauthorized)
	got := h.sim.Counters()
	if got["list"] != 1 || got["get"] != 1 || got["info"] != 1 {
		t.Errorf("counters %v: a 401 must not be retried", got)
	}
}
