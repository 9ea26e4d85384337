package pool_test

import (
	"net/http"
	"testing"

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

func TestReleaseOfUnknownIDIsConverged(t *testing.T) {
	h := newHarness(t, sim.Config{})
	if err := h.err(h.node.Release(ctx(t), "sb_never", "some-sandbox-token")); err != nil {
		t.Fatalf("release of an unknown id: %v, want nil (converged)", err)
	}
	if n := h.count("release"); n != 1 {
		t.Errorf("releases sent = %d, want 1 (a 404 is final, not retried)", n)
	}
}

func TestReleaseAfterLeaseEndIsConverged(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.claim("ns/a", 60)
	h.sim.Expire(c.ID)
	if err := h.err(h.node.Release(ctx(t), c.ID, c.Token)); err != nil {
		t.Fatalf("release of an expired sandbox: %v", err)
	}
}

func TestReleaseWithAnotherSandboxsTokenIs401AndNotRetried(t *testing.T) {
	h := newHarness(t, sim.Config{})
	a, b := h.claim("ns/a", 60), h.claim("ns/b", 60)

	err := h.err(h.node.Release(ctx(t), a.ID, b.Token))
	assertStatus(t, err, http.StatusUnauthorized)
	// The node token is not a release credential.
	err = h.err(h.node.Release(ctx(t), a.ID, ""))
	assertStatus(t, err, http.StatusUnauthorized)

	if n := h.count("release"); n != 2 {
		t.Errorf("releases sent = %d, want 2: a 401 is never retried", n)
	}
	if len(h.sim.Sandboxes()) != 2 {
		t.Error("a refused release removed a sandbox")
	}
}

// A release whose 204 is lost is retried, and the retry's 404 converges.
func TestReleaseWithLostResponseConvergesOnRetry(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.claim("ns/a", 60)
	h.sim.InjectFault(sim.Fault{Verb: "release", Mode: "lose-response", Count: 1})
	if err := h.err(h.node.Release(ctx(t), c.ID, c.Token)); err != nil {
		t.Fatalf("release: %v", err)
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
	if err := h.err(h.node.Release(ctx(t), "a/../../claim", "tok-0000")); err != nil {
		t.Fatalf("release: %v", err)
	}
	got := h.sim.Counters()
	if got["release_notfound"] != 1 || got["claim"] != 1 {
		t.Errorf("counters %v: the id escaped its path segment", got)
	}
}
