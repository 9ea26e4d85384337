package pipeline

import (
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// leaseRetries spaces the lease watch's calls for keys whose last look
// decided nothing (a failed renew, a failed listing, a deadline the node
// has not reaped yet): per key, exponential from the watch interval up to
// maxLeaseRetry. The backoff lives in the key's record (keyState.lease)
// only for such keys, and is dropped on the next decision.
type leaseRetries struct {
	interval time.Duration // the watch interval; 0 until watchLeases runs
	keys     *records

	// Owned by the lease-watch loop: the earliest moment a row can be
	// due, as of its last full pass and the rows put since; changed is
	// the store's list of those, reused.
	nextLook time.Time
	changed  []string
}

// quiet reports whether a pass at now can be skipped: no row the last
// full pass saw can be due yet, nor any row put since. A row put since
// is looked at alone (its key from the store's TakeChanged), so a node
// that keeps claiming pays for what it claims, not for the whole table
// each interval. A key in backoff, or one in its renewal window, makes
// every pass a full one, as does a list the store could not keep whole.
// Nothing else makes a row due sooner: the Pod's lifetime and sandboxd's
// renew verb only decide, inside the renewal window, whether to renew.
func (l *leaseRetries) quiet(st Store, now time.Time) bool {
	changed, all := st.TakeChanged(l.changed[:0])
	defer func() { clear(changed); l.changed = changed[:0] }()
	if all {
		return false
	}
	for _, k := range changed {
		if c, ok := st.Get(k); ok && !c.Deadline.IsZero() {
			if at := c.Deadline.Add(-l.lead(c)); at.Before(l.nextLook) {
				l.nextLook = at
			}
		}
	}
	return now.Before(l.nextLook)
}

func (l *leaseRetries) scanned(next time.Time) { l.nextLook = next }

// leaseRetry is one key's backoff.
type leaseRetry struct {
	bo   *backoff.ExponentialBackOff
	next time.Time
}

func newLeaseRetry(initial time.Duration) *leaseRetry {
	return &leaseRetry{bo: backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(initial), backoff.WithMaxInterval(maxLeaseRetry), backoff.WithMaxElapsedTime(0))}
}

const (
	maxLeaseRetry = 5 * time.Minute
	// maxRenewLead is how long before a deadline a renewal starts at most;
	// a short grant is renewed when a tenth of it is left, but never later
	// than three watch intervals ahead.
	maxRenewLead = 5 * time.Minute
)

func (l *leaseRetries) tick() time.Duration {
	if l.interval > 0 {
		return l.interval
	}
	return time.Second
}

// ready reports whether key may be looked at now.
func (l *leaseRetries) ready(key PodKey, now time.Time) bool { return l.keys.leaseReady(key, now) }

func (l *leaseRetries) failed(key PodKey, now time.Time) { l.keys.leaseFailed(key, now, l.tick()) }

func (l *leaseRetries) ok(key PodKey) { l.keys.leaseDecided(key) }

// lead is how long before c's deadline its renewal is due.
func (l *leaseRetries) lead(c store.Claim) time.Duration {
	return max(3*l.tick(), min(maxRenewLead, c.Deadline.Sub(c.ClaimedAt)/10))
}
