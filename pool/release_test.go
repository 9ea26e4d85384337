package pool_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestReleaseWithSandboxTokenIs204(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.claim("ns/a", 60)
	if err := h.err(h.node.Release(ctx(t), c.ID, c.Token)); err != nil {
		t.Fatalf("release: %v", err)
	}
	if n := h.count("release_ok"); n != 1 {
		t.Errorf("release_ok = %d, want 1", n)
	}
	if got := h.sim.Sandboxes(); len(got) != 0 {
		t.Errorf("still listed after release: %v", got)
	}
}

func TestReleaseWithoutSandboxTokenFallsBackToTheRootToken(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.claim("ns/a", 60)
	if err := h.err(h.root.Release(ctx(t), c.ID, "")); err != nil {
		t.Fatalf("root release: %v", err)
	}
	if n := h.count("release_ok"); n != 1 {
		t.Errorf("release_ok = %d, want 1", n)
	}
}

// sandboxd answers 404 for an unknown id and for a wrong token alike, so
// the client never folds it into success: the caller confirms with a Get.
func TestReleaseOfUnknownIDIsNotFoundNotSuccess(t *testing.T) {
	h := newHarness(t, sim.Config{})
	if err := h.err(h.node.Release(ctx(t), "sb_never", "some-sandbox-token")); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("release of an unknown id: %v, want ErrNotFound", err)
	}
	if n := h.count("release"); n != 1 {
		t.Errorf("releases sent = %d, want 1 (a 404 is final, not retried)", n)
	}
}

func TestReleaseAfterLeaseEndIsNotFoundAndGetConfirmsItGone(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.claim("ns/a", 60)
	h.sim.Expire(c.ID)
	if err := h.err(h.node.Release(ctx(t), c.ID, c.Token)); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("release of an expired sandbox: %v, want ErrNotFound", err)
	}
	if _, err := h.root.Get(ctx(t), c.ID); !errors.Is(h.err(err), pool.ErrNotFound) {
		t.Fatalf("root get of an expired sandbox: %v, want ErrNotFound", err)
	}
}

// A wrong token is answered like an unknown id (404), never retried, and
// the VM stays; a root Get still finds it.
func TestReleaseWithAnotherSandboxsTokenIs404AndNotRetried(t *testing.T) {
	h := newHarness(t, sim.Config{})
	a, b := h.claim("ns/a", 60), h.claim("ns/b", 60)

	err := h.err(h.node.Release(ctx(t), a.ID, b.Token))
	assertStatus(t, err, http.StatusNotFound)
	// The tenant token is not a release credential.
	err = h.err(h.node.Release(ctx(t), a.ID, ""))
	assertStatus(t, err, http.StatusNotFound)

	if n := h.count("release"); n != 2 {
		t.Errorf("releases sent = %d, want 2: a 404 is never retried", n)
	}
	if _, err := h.root.Get(ctx(t), a.ID); h.err(err) != nil {
		t.Errorf("root get after refused releases: %v, want the VM still there", err)
	}
	if len(h.sim.Sandboxes()) != 2 {
		t.Error("a refused release removed a sandbox")
	}
}

// A release whose 204 is lost is retried; the retry's 404 is surfaced for
// the caller to confirm, and a root Get then says the VM is gone.
func TestReleaseWithLostResponseRetriesAndGetConfirms(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.claim("ns/a", 60)
	h.sim.InjectFault(sim.Fault{Verb: "release", Mode: "lose-response", Count: 1})
	if err := h.err(h.node.Release(ctx(t), c.ID, c.Token)); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("release: %v, want the retry's ErrNotFound", err)
	}
	if _, err := h.root.Get(ctx(t), c.ID); !errors.Is(h.err(err), pool.ErrNotFound) {
		t.Fatalf("root get: %v, want ErrNotFound (released)", err)
	}
	got := h.sim.Counters()
	if got["release"] != 2 || got["release_ok"] != 1 || got["release_notfound"] != 1 {
		t.Errorf("release=%d ok=%d notfound=%d, want 2, 1, 1", got["release"], got["release_ok"], got["release_notfound"])
	}
}

func TestReleaseOfEmptyIDIsRefusedLocally(t *testing.T) {
	h := newHarness(t, sim.Config{})
	if err := h.err(h.node.Release(ctx(t), "", "x")); err == nil {
		t.Fatal("want an error")
	}
	if n := h.count("release"); n != 0 {
		t.Errorf("sent %d requests", n)
	}
}

func TestReleaseIDIsPathEscaped(t *testing.T) {
	h := newHarness(t, sim.Config{})
	h.claim("ns/a", 60)
	// "a/../../claim" must stay one path segment, not walk to another route.
	if err := h.err(h.node.Release(ctx(t), "a/../../claim", "tok-0000")); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("release: %v, want ErrNotFound", err)
	}
	got := h.sim.Counters()
	if got["release_notfound"] != 1 || got["claim"] != 1 {
		t.Errorf("counters %v: the id escaped its path segment", got)
	}
}

// Renew resets the lease; the node's grant is authoritative (capped).
func TestRenewReturnsTheNodesGrant(t *testing.T) {
	h := newHarness(t, sim.Config{MaxTTL: time.Hour})
	c := h.claim("ns/a", 60)
	got, err := h.node.Renew(ctx(t), c.ID, c.Token, 7200)
	if h.err(err) != nil {
		t.Fatal(err)
	}
	if d := time.Until(got.Deadline); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("granted %v from now, want the 1h cap", d)
	}
	if _, err := h.node.Renew(ctx(t), c.ID, "wrong-token-0000", 60); !errors.Is(h.err(err), pool.ErrNotFound) {
		t.Errorf("renew with a wrong token: %v, want ErrNotFound", err)
	}
}
