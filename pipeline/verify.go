package pipeline

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// verifyQuarantine lifts quarantine from rows loaded off disk as soon as
// one sandboxd listing succeeds: a listed row becomes durable and
// adoptable; a row the node no longer holds is dropped (the VM is already
// gone, so nothing is released). A failed listing drops nothing. Once no
// quarantined row remains, the loop ends.
func (e *Engine) verifyQuarantine(ctx context.Context) {
	defer close(e.verified)
	if len(e.table.quarantinedKeys()) == 0 {
		return
	}
	eb := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(e.cfg.VerifyInterval),
		backoff.WithMaxElapsedTime(0), // until it succeeds or ctx ends
	)
	_ = backoff.RetryNotify(func() error { return e.verifyOnce(ctx) }, backoff.WithContext(eb, ctx),
		func(err error, wait time.Duration) {
			e.log.Warn("quarantine verification: sandboxd listing failed; rows stay quarantined", "error", err, "retry_in", wait)
		})
}

func (e *Engine) verifyOnce(ctx context.Context) error {
	rows, err := e.sbx.List(ctx, "")
	if err != nil {
		return err
	}
	listed := make(map[string]struct{}, len(rows))
	for _, r := range rows {
		listed[r.ID] = struct{}{}
	}
	var lifted, dropped int
	var failed error
	for _, key := range e.table.quarantinedKeys() {
		unlock := e.locks.lock(key)
		c, st := e.table.lookup(key)
		if st == StateQuarantined {
			if _, ok := listed[c.ID]; ok {
				e.table.lift(key)
				lifted++
				e.obs.Decision(ctx, "quarantine_lifted", "listed")
			} else if err := e.store.Delete(ctx, key); err != nil {
				failed = err // stays quarantined; the next try drops it
			} else {
				e.table.lift(key)
				dropped++
				e.obs.Decision(ctx, "quarantine_dropped", "not-listed")
				e.log.Info("dropped a loaded claim that sandboxd no longer holds", "pod", key, "claim", c.ID)
			}
		}
		unlock()
	}
	e.log.Info("quarantine verification", "lifted", lifted, "dropped", dropped)
	return failed
}
