package pipeline_test

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// loopInterval is the interval of every loop a test drives: the lease
// watch's default, so that its backoff and its renewal lead, both counted
// in watch intervals, are what they are in production.
const loopInterval = time.Second

// loopClock is the fake clock a test's engine reads (Config.Clock), and
// the test's handle on the engine's background loops. Only passAt moves
// it, so a loop ticks only when the test says: a whole loopInterval from
// the clock's start, as a ticker of the fake clock does.
type loopClock struct {
	*clocktesting.FakeClock
	start time.Time
	rep   *reporter
	// tickers is how many tickers it has once the loops run: one a loop,
	// and the heartbeat of each shard's workqueue, which reads Config.Clock
	// too. A retry waiting in a workqueue adds a timer.
	tickers int
}

// driveLoops turns the named loops (pipeline.Loop*) on in cfg, every
// loopInterval of a fake clock that starts at the current second. The
// orphan scan reports to cfg.OrphanObserver, a fresh orphanObs if unset.
// cfg.Observer must be the test's reporter: it counts the passes.
func driveLoops(cfg *pipeline.Config, loops ...string) *loopClock {
	for _, l := range loops {
		switch l {
		case pipeline.LoopLeaseWatch:
			cfg.LeaseCheckInterval = loopInterval
		case pipeline.LoopReauthorize:
			cfg.ReauthorizeInterval = loopInterval
		case pipeline.LoopOrphanScan:
			cfg.OrphanScanInterval = loopInterval
			if cfg.OrphanObserver == nil {
				cfg.OrphanObserver = &orphanObs{}
			}
		default:
			panic("driveLoops: no loop " + l)
		}
	}
	start := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakeClock(start)
	cfg.Clock = clk
	shards := cfg.Shards
	if shards == 0 {
		shards = pipeline.DefaultConfig().Shards
	}
	return &loopClock{FakeClock: clk, start: start, rep: cfg.Observer.(*reporter), tickers: len(loops) + shards}
}

// newLoopRig is newRig with the named loops driven by the returned clock.
func newLoopRig(t testing.TB, sc sim.Config, mod func(*pipeline.Config), loops ...string) (*rig, *loopClock) {
	t.Helper()
	var c *loopClock
	r := newRig(t, sc, func(cfg *pipeline.Config) {
		if mod != nil {
			mod(cfg)
		}
		c = driveLoops(cfg, loops...)
	})
	return r, c
}

// nextTick is when the loops tick next: the first whole loopInterval from
// the start past the clock's time (passAt leaves the clock on the instant
// of the last pass).
func (c *loopClock) nextTick() time.Time {
	return c.start.Add((c.Now().Sub(c.start)/loopInterval + 1) * loopInterval)
}

// beforeTick is the earliest instant, no earlier than notBefore, at which
// a pass may run (passAt) so that the next tick comes gap later: how a
// test looks twice within one interval.
func (c *loopClock) beforeTick(notBefore time.Time, gap time.Duration) time.Time {
	from := c.nextTick()
	if notBefore.After(from) {
		from = notBefore
	}
	n := (from.Add(gap).Sub(c.start) + loopInterval - 1) / loopInterval
	return c.start.Add(n * loopInterval).Add(-gap)
}

// passAt sets the clock to at, which must reach the loops' next tick, and
// returns once the pass of loop that this tick runs has ended. Passes never
// overlap, and the clock moves only here, so the pass awaited is the one
// this step started, and nothing runs between two calls.
func (c *loopClock) passAt(t testing.TB, loop string, at time.Time) {
	t.Helper()
	if next := c.nextTick(); at.Before(next) {
		t.Fatalf("%s pass asked at %s, before the next tick %s", loop, at.Format(time.RFC3339Nano), next.Format(time.RFC3339Nano))
	}
	// A ticker made after the step would count its interval from there.
	testkit.WaitFor(t, waitTimeout, "the loops' tickers", func() bool { return c.Waiters() >= c.tickers })
	passes := func() int { return countOf(c.rep.snapshot(), "pass", "", loop) }
	n := passes()
	c.SetTime(at)
	testkit.WaitFor(t, waitTimeout, fmt.Sprintf("pass %d of %s at %s", n+1, loop, at.Format(time.RFC3339Nano)),
		func() bool { return passes() > n })
}

// pass runs one pass of loop at its next tick, or now if the next tick is
// behind the real clock (the emulator's VMs carry real claim times).
func (c *loopClock) pass(t testing.TB, loop string) {
	t.Helper()
	at := c.nextTick()
	if now := time.Now(); now.After(at) {
		at = now
	}
	c.passAt(t, loop, at)
}
