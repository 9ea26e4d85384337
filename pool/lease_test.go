package pool_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestSandboxPastItsLeaseDisappearsFromTheList(t *testing.T) {
	h := newHarness(t, sim.Config{})
	short := h.claim("ns/short", 1)
	long := h.claim("ns/long", 600)

	testkit.WaitFor(t, 5*time.Second, "the 1s lease to be reaped", func() bool {
		rows, err := h.node.List(ctx(t), pool.ListOptions{})
		if h.err(err) != nil {
			return false
		}
		return !slices.ContainsFunc(rows, func(s pool.Sandbox) bool { return s.ID == short.ID })
	})
	rows, err := h.node.List(ctx(t), pool.ListOptions{})
	if h.err(err) != nil || len(rows) != 1 || rows[0].ID != long.ID {
		t.Errorf("after reaping: %v, %v; want only the long lease", rows, err)
	}
	// The reaped sandbox's release is a 404 that a root Get confirms.
	if err := h.err(h.node.Release(ctx(t), short.ID, short.Token)); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("release after the lease: %v, want ErrNotFound", err)
	}
	if _, err := h.root.Get(ctx(t), short.ID); !errors.Is(h.err(err), pool.ErrNotFound) {
		t.Errorf("root get after the lease: %v, want ErrNotFound", err)
	}
}

func TestSetDeadlineInThePastReapsTheSandbox(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.claim("ns/a", 600)
	h.sim.SetDeadline(c.ID, time.Now().Add(-time.Second))
	testkit.WaitFor(t, 5*time.Second, "the reaper", func() bool { return len(h.sim.Sandboxes()) == 0 })
}
