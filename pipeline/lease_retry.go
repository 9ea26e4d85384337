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

	// Owned by the lease-watch loop: the store version its last full pass
	// scanned, and the earliest moment a row of that pass can be due.
	seen     uint64
	nextLook time.Time
}

// quiet reports whether a pass at now can be skipped: no row has changed
// since the last full pass (the store is at the version it scanned), and
// none of its rows can be due yet. A key in backoff, or one in its
// renewal window, makes every pass a full one, as does any commit.
// Nothing else makes a row due sooner: the Pod's lifetime and sandboxd's
// renew verb only decide, inside the renewal window, whether to renew.
func (l *leaseRetries) quiet(version uint64, now time.Time) bool {
	return version == l.seen && now.Before(l.nextLook)
}

func (l *leaseRetries) scanned(version uint64, next time.Time) { l.seen, l.nextLook = version, next }

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
