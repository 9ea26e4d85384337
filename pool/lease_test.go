package pool_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestSandboxPastItsLeaseDisappearsFromTheList(t *testing.T) {
	h := newHarness(t, sim.Config{})
	short := h.claim("ns/short", 1)
	long := h.claim("ns/long", 600)

	waitFor(t, 5*time.Second, "the 1s lease to be reaped", func() bool {
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
	// The reaped sandbox's release converges.
	if err := h.err(h.node.Release(ctx(t), short.ID, short.Token)); err != nil {
		t.Errorf("release after the lease: %v", err)
	}
}

func TestSetDeadlineInThePastReapsTheSandbox(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.claim("ns/a", 600)
	h.sim.SetDeadline(c.ID, time.Now().Add(-time.Second))
	waitFor(t, 5*time.Second, "the reaper", func() bool { return len(h.sim.Sandboxes()) == 0 })
}
