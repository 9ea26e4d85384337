package pipeline

import (
	"context"
	"time"
)

// Test hooks into the background loops, so that the black-box tests can run
// one cycle at a chosen instant instead of waiting for a ticker.

// CheckLeases runs one lease-watch cycle as if the clock read now.
func (e *Engine) CheckLeases(ctx context.Context, now time.Time) { e.checkLeases(ctx, now) }

// ScanOrphansOnce runs one orphan-scan cycle.
func (e *Engine) ScanOrphansOnce(ctx context.Context, obs OrphanObserver) {
	e.scanOrphans(ctx, obs, map[string]bool{})
}

// NumRequeues is the rate limiter's failure count for uid in its shard.
func (e *Engine) NumRequeues(uid string) int { return e.shardFor(uid).q.NumRequeues(uid) }

// ReauthorizeOnce runs one pass of the detached-claim re-authorization.
func (e *Engine) ReauthorizeOnce(ctx context.Context) { e.reauthorizeOnce(ctx) }
