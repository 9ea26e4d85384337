package pipeline

import (
	"context"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// WatchLeases pushes the end of a lease. virtual-kubelet never polls an
// async provider, so an expiry nobody pushes is never seen. Every interval,
// rows whose recorded deadline has passed trigger one sandboxd listing:
//   - sandbox gone: the row is forgotten and the Pod goes Failed with
//     SandboxLeaseExpired (the only terminal state);
//   - still listed: the row takes the listing's deadline;
//   - listing failed: nothing is decided.
//
// Past-deadline rows are found by a scan of the table each interval (not
// per claim); the listing only happens when at least one has passed.
func (e *Engine) WatchLeases(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.checkLeases(ctx, time.Now())
		}
	}
}

func (e *Engine) checkLeases(ctx context.Context, now time.Time) {
	var due []string
	e.store.Range(func(key string, c store.Claim) bool {
		if !c.Deadline.IsZero() && now.After(c.Deadline) {
			due = append(due, key)
		}
		return true
	})
	if len(due) == 0 {
		return
	}
	rows, err := e.sbx.List(ctx, "")
	if err != nil {
		e.log.Warn("lease watch: sandboxd listing failed; deciding nothing", "due", len(due), "error", err)
		return
	}
	listed := make(map[string]time.Time, len(rows))
	for _, r := range rows {
		listed[r.ID] = r.Deadline
	}
	for _, key := range due {
		e.expireOne(ctx, key, now, listed)
	}
}

func (e *Engine) expireOne(ctx context.Context, key string, now time.Time, listed map[string]time.Time) {
	defer e.locks.lock(key)()
	c, st := e.table.lookup(key)
	// Identity re-check: the key may hold a newer claim since the scan.
	if st != StateDurable || !now.After(c.Deadline) {
		return
	}
	if deadline, ok := listed[c.ID]; ok {
		if deadline.After(c.Deadline) {
			c.Deadline = deadline
			if err := e.store.Put(context.WithoutCancel(ctx), key, c); err != nil {
				e.log.Error("lease watch: could not record the refreshed deadline", "pod", key, "claim", c.ID, "error", err)
			}
		}
		return
	}
	// sandboxd confirms the VM is gone: nothing is released, the row is
	// only forgotten.
	if err := e.store.Delete(context.WithoutCancel(ctx), key); err != nil {
		e.log.Error("lease watch: could not forget an expired claim", "pod", key, "claim", c.ID, "error", err)
		return
	}
	e.obs.Decision(ctx, "lease_expired", "not-listed")
	e.log.Info("lease ended", "pod", key, "claim", c.ID, "deadline", c.Deadline)
	e.rep.Expired(ctx, PodRef{Key: key, UID: c.PodUID, OwnerUID: c.OwnerUID}, c)
}
