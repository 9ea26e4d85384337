package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// ReasonRenewFailed is the Warning raised when a lease renewal fails.
const ReasonRenewFailed = "SandboxLeaseRenewFailed"

// watchLeases keeps leases and pushes their end. virtual-kubelet never
// polls an async provider, so an expiry nobody pushes is never seen.
//
// The node's grant (the deadline in the claim answer) is authoritative, and
// a node caps a lease at 24 h. When the Pod asked for longer
// (ttl-seconds), the claim is renewed ahead of each deadline until the
// grant reaches the asked-for lifetime, counted from the claim time; each
// new deadline is made durable before it is shown on the Pod. A failed
// renew raises a Warning and is retried with backoff.
//
// Once a recorded deadline has passed, one sandboxd listing decides, and a
// VM the listing does not show is asked about by id (expiredVM):
//   - sandbox gone: the row is forgotten and the Pod goes Failed with
//     SandboxLeaseExpired (the only terminal state);
//   - still listed with a later deadline: the row takes it;
//   - still listed with the same deadline, or the listing failed: nothing
//     is decided, and the key is looked at again after a backoff, so a
//     node that is slow to reap is not listed every interval.
//
// Due rows are found by a scan of the store (never per claim), only when
// one can be due: the rows put since the last scan are looked at alone
// (see quiet), so a node whose rows are all far from their deadlines is
// not scanned however fast it claims. sandboxd is only called for rows
// that are due.
func (e *Engine) watchLeases(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	e.leases.interval = interval
	e.every(ctx, LoopLeaseWatch, interval, func() { e.checkLeases(ctx, e.cfg.Clock.Now()) })
}

func (e *Engine) checkLeases(ctx context.Context, now time.Time) {
	if e.leases.quiet(e.store, now) {
		return
	}
	var expired, renew []PodKey
	next := endOfTime
	e.store.Range(func(k string, c store.Claim) bool {
		key := PodKey(k)
		switch {
		case c.Deadline.IsZero():
		case !e.leases.ready(key, now):
			next = now
		case now.After(c.Deadline):
			expired, next = append(expired, key), now
		case e.renewDue(key, c, now):
			renew, next = append(renew, key), now
		default:
			// The earliest this row can be due: its renewal window opens
			// (whether it may be renewed then is decided then), and its
			// deadline is later still.
			if at := c.Deadline.Add(-e.leases.lead(c)); at.Before(next) {
				next = at
			}
		}
		return true
	})
	e.leases.scanned(next)
	for _, key := range renew {
		e.renewOne(ctx, key, now)
	}
	if len(expired) == 0 {
		return
	}
	rows, err := e.sbx.List(ctx, pool.ListOptions{})
	if err != nil {
		e.log.Warn("lease watch: sandboxd listing failed; deciding nothing", "due", len(expired), "error", err)
		for _, key := range expired {
			e.leases.failed(key, now)
		}
		return
	}
	listed := make(map[string]time.Time, len(rows))
	for _, r := range rows {
		listed[r.ID] = r.Deadline
	}
	for _, key := range expired {
		e.expireOne(ctx, key, now, listed)
	}
}

// lifetimeEnd is when the lifetime that key's Pod asked for ends (never,
// for TTLWhilePodLives), or false when the Pod asked for the node's
// default (ttl-seconds 0).
//
// The lifetime is known once the key's Pod was published Running in this
// process. Until then (after a restart, while virtual-kubelet has not
// handed the Pod back, as during an apiserver outage) the claim is renewed
// as a Pod without ttl-seconds would be: the node must not reap a VM whose
// Pod asked for longer because this process cannot read the Pod yet. Once
// the Pod is seen, its own ttl-seconds applies; a cap it set may so be
// passed by at most the time it was unknown.
func (e *Engine) lifetimeEnd(key PodKey, c store.Claim) (time.Time, bool) {
	ttl, ok := e.keys.lifetimeOf(key)
	switch {
	case !ok || ttl == TTLWhilePodLives:
		return endOfTime, true
	case ttl == 0:
		return time.Time{}, false
	}
	return c.ClaimedAt.Add(time.Duration(ttl) * time.Second), true
}

// canRenew: the node has the renew verb, or its features are not known
// yet (a renew then answers for itself).
func (e *Engine) canRenew() bool {
	f, ok := e.sbx.Features()
	return !ok || f.Renew
}

// ReasonLeaseNotRenewable is the Warning on a Pod that asked to live past
// its grant on a sandboxd without the renew verb (before V2).
const ReasonLeaseNotRenewable = "SandboxLeaseNotRenewable"

// warnIfNotRenewable raises ReasonLeaseNotRenewable for a Pod whose asked-for
// lifetime outlasts its grant on a node that cannot renew.
func (e *Engine) warnIfNotRenewable(ctx context.Context, ref PodRef, c store.Claim) {
	if end, ok := e.lifetimeEnd(ref.Key, c); ok && c.Deadline.Before(end.Add(-time.Second)) && !e.canRenew() {
		e.rep.Warning(ctx, ref, ReasonLeaseNotRenewable, fmt.Sprintf(
			"%s: this sandboxd cannot renew leases (it has no renew verb), so VM %s ends at its grant, %s, not when the Pod asked",
			ref.Key, c.ID, c.Deadline.UTC().Format(time.RFC3339)))
	}
}

// endOfTime is the lifetime end of a Pod that asked for no end.
var endOfTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// grantAsked is the ttl_seconds a claim or renewal asks for, for a Pod that
// wants ttl more seconds: the node's cap for a Pod without an end.
func grantAsked(ttl int64) int64 {
	if ttl == TTLWhilePodLives || ttl > maxGrantSeconds {
		return maxGrantSeconds
	}
	return ttl
}

// renewDue: the grant ends before the asked-for lifetime, and the deadline
// is within the renewal lead.
func (e *Engine) renewDue(key PodKey, c store.Claim, now time.Time) bool {
	end, ok := e.lifetimeEnd(key, c)
	// A grant within a second of the end is the end: deadlines are truncated.
	if !ok || !c.Deadline.Before(end.Add(-time.Second)) || !e.canRenew() {
		return false
	}
	return !now.Before(c.Deadline.Add(-e.leases.lead(c)))
}

func (e *Engine) renewOne(ctx context.Context, key PodKey, now time.Time) {
	unlock, ok := e.keys.tryLock(key)
	if !ok {
		return // a transaction holds the key: the next tick looks again
	}
	defer unlock()
	c, st := e.keys.lookup(key)
	end, ok := e.lifetimeEnd(key, c)
	// Identity re-check: the key may hold a newer claim since the scan.
	if st != StateDurable || !ok || !now.Before(c.Deadline) {
		return
	}
	ref := PodRef{Key: key, UID: c.PodUID, OwnerUID: c.OwnerUID, Owner: c.Owner}
	ttl := grantAsked(int64(end.Sub(now).Round(time.Second) / time.Second))
	resp, err := e.sbx.Renew(ctx, c.ID, c.Token, ttl)
	if err == nil && !resp.Deadline.Equal(c.Deadline) {
		// The grant is authoritative, even one that does not extend the
		// lease: it is what the node will reap by.
		next := c
		next.Deadline = resp.Deadline
		if err = e.store.Put(context.WithoutCancel(ctx), string(key), next); err == nil {
			e.log.Info("lease renewed", "pod", key, "claim", c.ID, "deadline", next.Deadline, "lifetime_end", end)
			e.rep.Renewed(ctx, ref, viewOf(next, StateDurable))
		}
	}
	if err == nil && !resp.Deadline.After(c.Deadline) {
		err = fmt.Errorf("the node granted %s, no later than the deadline it replaces", resp.Deadline.UTC().Format(time.RFC3339))
	}
	if err == nil {
		e.leases.ok(key)
		e.obs.Decision(ctx, decisionRenew, "ok")
		return
	}
	e.leases.failed(key, now)
	e.obs.Decision(ctx, decisionRenew, "failed")
	err = keyErr(key, "lease renewal of "+c.ID, err)
	if errors.Is(err, pool.ErrNotFound) {
		// Gone, or the stored token is refused: the expiry check at the
		// deadline asks the listing which one.
		e.log.Warn("lease watch: sandboxd does not know the claim's token or id; its deadline decides", "pod", key, "claim", c.ID, "error", err)
	} else {
		e.log.Warn("lease watch: renewal failed; retried with backoff", "pod", key, "claim", c.ID, "error", err)
	}
	e.rep.Warning(ctx, ref, ReasonRenewFailed, err.Error())
}

func (e *Engine) expireOne(ctx context.Context, key PodKey, now time.Time, listed map[string]time.Time) {
	unlock, ok := e.keys.tryLock(key)
	if !ok {
		return // a transaction holds the key: the next tick looks again
	}
	defer unlock()
	c, st := e.keys.lookup(key)
	// Identity re-check: the key may hold a newer claim since the scan.
	if st != StateDurable || !now.After(c.Deadline) {
		return
	}
	deadline, ok := listed[c.ID]
	if !ok {
		var err error
		if deadline, ok, err = e.expiredVM(ctx, key, c); err != nil {
			e.log.Warn("lease watch: whether an expired claim's VM is gone could not be told; deciding nothing", "pod", key, "claim", c.ID, "error", err)
			e.leases.failed(key, now)
			return
		}
	}
	if ok {
		if !deadline.After(c.Deadline) {
			e.leases.failed(key, now) // the node has not reaped it yet
			return
		}
		c.Deadline = deadline
		if err := e.store.Put(context.WithoutCancel(ctx), string(key), c); err != nil {
			e.log.Error("lease watch: could not record the refreshed deadline", "pod", key, "claim", c.ID, "error", err)
			e.leases.failed(key, now)
			return
		}
		e.leases.ok(key)
		return
	}
	// sandboxd confirms the VM is gone: the row is only forgotten.
	if err := e.store.Delete(context.WithoutCancel(ctx), string(key)); err != nil {
		e.log.Error("lease watch: could not forget an expired claim", "pod", key, "claim", c.ID, "error", err)
		e.leases.failed(key, now)
		return
	}
	e.forgetRow(key)
	e.obs.Decision(ctx, decisionLeaseExpired, "not-listed")
	e.log.Info("lease ended", "pod", key, "claim", c.ID, "deadline", c.Deadline)
	e.rep.Expired(ctx, PodRef{Key: key, UID: c.PodUID, OwnerUID: c.OwnerUID}, viewOf(c, stateNone))
}

// expiredVM tells, for a claim past its deadline that the listing does not
// show, whether its VM is still there (and its deadline) or gone. Absence
// from a listing is no proof (see proveGone): a root read of the id decides.
// A tenant token cannot read by id; it releases the VM with the VM's own
// token instead, which is harmless past the lease: 204 or 404 to the
// sandbox's own credential after its deadline both mean the VM is gone now.
func (e *Engine) expiredVM(ctx context.Context, key PodKey, c store.Claim) (deadline time.Time, there bool, err error) {
	if !e.sbx.Tenant() {
		row, err := e.sbx.Get(ctx, c.ID)
		switch {
		case err == nil:
			return row.Deadline, true, nil
		case errors.Is(err, pool.ErrNotFound):
			return time.Time{}, false, nil
		case !errors.Is(err, pool.ErrForbidden):
			return time.Time{}, false, err
		}
	}
	if err := e.sbx.Release(ctx, c.ID, c.Token); err != nil && !errors.Is(err, pool.ErrNotFound) {
		return time.Time{}, false, keyErr(key, "release of expired "+c.ID, err)
	}
	return time.Time{}, false, nil
}
