package pool_test

import (
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestClaimReturnsIDTokenDeadlineAndOwnerAddr(t *testing.T) {
	h := newHarness(t, sim.Config{})
	before := time.Now()
	resp := h.claim("ns/a", 600)

	if !strings.HasPrefix(resp.ID, "sb_") {
		t.Errorf("id %q: want sb_ prefix", resp.ID)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(resp.Token) {
		t.Errorf("token is not 32 hex characters (len %d)", len(resp.Token))
	}
	if !strings.HasPrefix(resp.OwnerAddr, "10.77.") || !strings.HasSuffix(resp.OwnerAddr, ":7777") {
		t.Errorf("owner_addr %q: want 10.77.x.y:7777", resp.OwnerAddr)
	}
	want := before.Add(600 * time.Second)
	if d := resp.Deadline.Sub(want); d < -time.Second || d > 5*time.Second {
		t.Errorf("deadline %v: want about %v", resp.Deadline, want)
	}
	if n := h.count("claim_ok"); n != 1 {
		t.Errorf("claim_ok = %d, want 1", n)
	}
}

func TestClaimTTLZeroTakesTheSandboxdDefault(t *testing.T) {
	h := newHarness(t, sim.Config{})
	resp := h.claim("ns/a", 0)
	if d := time.Until(resp.Deadline); d < 4*time.Minute || d > 6*time.Minute {
		t.Errorf("deadline in %v, want about 5m (the sandboxd default)", d)
	}
}

func TestClaimRedirectOnlyIsACapacityMissWithPeers(t *testing.T) {
	h := newHarness(t, sim.Config{MaxClaims: 1, Capacity: sim.CapacityRedirect})
	h.claim("ns/a", 60)

	_, err := h.node.Claim(ctx(t), pool.ClaimRequest{Template: "default", ClaimRef: "ns/b"})
	h.err(err)
	if !errors.Is(err, pool.ErrCapacity) {
		t.Fatalf("err = %v, want ErrCapacity", err)
	}
	if got := pool.Redirects(err); !slices.Equal(got, []string{"10.0.0.9:7777"}) {
		t.Errorf("Redirects = %v", got)
	}
	if pool.IsRetryable(err) {
		t.Error("a capacity miss must not be retryable")
	}
}

func TestClaimWithNoRedirectGets429Instead(t *testing.T) {
	h := newHarness(t, sim.Config{MaxClaims: 1, Capacity: sim.CapacityRedirect})
	h.claim("ns/a", 60)
	_, err := h.node.Claim(ctx(t), pool.ClaimRequest{Template: "default", NoRedirect: true})
	assertStatus(t, h.err(err), http.StatusTooManyRequests)
}

func TestClaimAtMaxClaimsIs429CapacityMiss(t *testing.T) {
	h := newHarness(t, sim.Config{MaxClaims: 1})
	h.claim("ns/a", 60)

	_, err := h.node.Claim(ctx(t), pool.ClaimRequest{Template: "default"})
	he := assertStatus(t, h.err(err), http.StatusTooManyRequests)
	if !errors.Is(err, pool.ErrCapacity) || pool.IsRetryable(err) {
		t.Errorf("429: Is(ErrCapacity)=%v IsRetryable=%v, want true, false", errors.Is(err, pool.ErrCapacity), pool.IsRetryable(err))
	}
	if he.Message != "node at max_claims" {
		t.Errorf("message %q", he.Message)
	}
}

func TestClaimForUnknownTemplateIs400(t *testing.T) {
	h := newHarness(t, sim.Config{})
	for _, r := range []pool.ClaimRequest{
		{Template: "nope"},
		{Template: "default", Net: "other"},
		{Template: ""},
		{Template: "default", TTLSeconds: -1},
	} {
		_, err := h.node.Claim(ctx(t), r)
		assertStatus(t, h.err(err), http.StatusBadRequest)
		if pool.IsRetryable(err) || errors.Is(err, pool.ErrCapacity) {
			t.Errorf("%+v: a 400 is neither retryable nor a capacity miss", r)
		}
	}
}

func TestClaimWithBadTokenIs401(t *testing.T) {
	h := newHarness(t, sim.Config{})
	_, err := h.client("wrong-token-123456", nil).Claim(ctx(t), pool.ClaimRequest{Template: "default"})
	assertStatus(t, h.err(err), http.StatusUnauthorized)
	if pool.IsRetryable(err) {
		t.Error("401 must not be retryable")
	}
}

// 409 comes only from InjectFault: a duplicate claim_ref is not a conflict
// at sandboxd (see TestDuplicateClaimRefIsNotAConflict).
func TestClaimConflictIs409AndNotRetryable(t *testing.T) {
	h := newHarness(t, sim.Config{})
	h.sim.InjectFault(sim.Fault{Verb: "claim", Mode: "409", Count: 1})
	_, err := h.node.Claim(ctx(t), pool.ClaimRequest{Template: "default"})
	assertStatus(t, h.err(err), http.StatusConflict)
	if pool.IsRetryable(err) {
		t.Error("409 must not be retryable")
	}
}

func TestClaimProvisioningFailureIs500RetryableButNotRetried(t *testing.T) {
	h := newHarness(t, sim.Config{FailRate: 1})
	_, err := h.node.Claim(ctx(t), pool.ClaimRequest{Template: "default"})
	assertStatus(t, h.err(err), http.StatusInternalServerError)
	if got, want := err.Error(), "sandboxd claim: 500: provisioning failed"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !pool.IsRetryable(err) {
		t.Error("500 must be retryable")
	}
	if n := h.count("claim"); n != 1 {
		t.Errorf("sandboxd saw %d claims, want exactly 1: claims are never retried by the client", n)
	}
}

func TestClaimIsNeverRetriedEvenOn503(t *testing.T) {
	h := newHarness(t, sim.Config{})
	h.sim.InjectFault(sim.Fault{Verb: "claim", Mode: "503", Count: 1})
	_, err := h.node.Claim(ctx(t), pool.ClaimRequest{Template: "default"})
	assertStatus(t, h.err(err), http.StatusServiceUnavailable)
	if n := h.count("claim"); n != 1 {
		t.Errorf("claims = %d, want 1", n)
	}
}

func TestDuplicateClaimRefIsNotAConflict(t *testing.T) {
	h := newHarness(t, sim.Config{})
	a, b := h.claim("ns/a", 60), h.claim("ns/a", 60)
	if a.ID == b.ID {
		t.Fatal("two claims returned one id")
	}
	rows, err := h.node.List(ctx(t), pool.ListOptions{ClaimRef: "ns/a"})
	if h.err(err) != nil || len(rows) != 2 {
		t.Fatalf("list ns/a = %d rows, %v; want 2: sandboxd doubles a VM claimed twice", len(rows), err)
	}
}

// the sandboxd protocol (docs/architecture.md): a lost claim response is recovered by claim_ref, then its
// credential by a root GET, never by claiming again.
func TestLostClaimResponseIsRecoverableByClaimRef(t *testing.T) {
	h := newHarness(t, sim.Config{})
	h.sim.InjectFault(sim.Fault{Verb: "claim", Mode: "lose-response", Count: 1})

	_, err := h.node.Claim(ctx(t), pool.ClaimRequest{Template: "default", ClaimRef: "ns/lost"})
	h.err(err)
	if err == nil || !pool.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable transport error", err)
	}
	var he *pool.HTTPError
	if errors.As(err, &he) || errors.Is(err, pool.ErrBadResponse) {
		t.Fatalf("a lost response is a transport error, got %v", err)
	}
	rows, err := h.node.List(ctx(t), pool.ListOptions{ClaimRef: "ns/lost"})
	if h.err(err) != nil || len(rows) != 1 {
		t.Fatalf("list by claim_ref: %d rows, %v; want the one VM that was made", len(rows), err)
	}
	row, err := h.root.Get(ctx(t), rows[0].ID)
	if h.err(err) != nil || row.Token == "" {
		t.Fatalf("root get: token present=%v, %v", row.Token != "", err)
	}
	h.secret(row.Token)
	if err := h.err(h.node.Release(ctx(t), row.ID, row.Token)); err != nil {
		t.Fatalf("release with recovered token: %v", err)
	}
}

func TestClaimFromAnEmptyPoolBootsCold(t *testing.T) {
	h := newHarness(t, sim.Config{
		Pools:       map[pool.Key]int{defaultKey: 1},
		RefillDelay: time.Hour,
		ColdLatency: 30 * time.Millisecond,
	})
	h.claim("ns/warm", 60)
	start := time.Now()
	h.claim("ns/cold", 60)
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("cold claim took %v, want at least the cold latency", d)
	}
	info, err := h.root.Info(ctx(t))
	if h.err(err) != nil {
		t.Fatal(err)
	}
	if p := info.Pools[0]; p.Warm != 0 || p.Refilling != 1 || p.Target != 1 || info.Claimed != 2 {
		t.Errorf("info = %+v, claimed %d; want warm 0, refilling 1, target 1, claimed 2", p, info.Claimed)
	}
}

func TestWarmPoolRefillsAfterRefillDelay(t *testing.T) {
	h := newHarness(t, sim.Config{Pools: map[pool.Key]int{defaultKey: 2}, RefillDelay: 100 * time.Millisecond})
	h.claim("ns/a", 60)
	testkit.WaitFor(t, 5*time.Second, "the pool to refill", func() bool {
		info, err := h.root.Info(ctx(t))
		return h.err(err) == nil && info.Pools[0].Warm == 2 && info.Pools[0].Refilling == 0
	})
}

// assertStatus fails unless err is an *HTTPError with the status.
func assertStatus(t *testing.T, err error, status int) *pool.HTTPError {
	t.Helper()
	var he *pool.HTTPError
	if !errors.As(err, &he) || he.Status != status {
		t.Fatalf("err = %v, want an HTTPError %d", err, status)
	}
	return he
}
