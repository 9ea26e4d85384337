package pipeline

import (
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// leaseRetries spaces the lease watch's calls for keys whose last look
// decided nothing (a failed renew, a failed listing, a deadline the node
// has not reaped yet): per key, exponential from the watch interval up to
// maxLeaseRetry. It holds an entry only for such keys, and drops it on the
// next decision.
type leaseRetries struct {
	interval time.Duration // the watch interval; 0 until WatchLeases runs

	mu   sync.Mutex
	keys map[string]*leaseRetry
}

type leaseRetry struct {
	bo   *backoff.ExponentialBackOff
	next time.Time
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
func (l *leaseRetries) ready(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.keys[key]
	return !ok || !now.Before(r.next)
}

func (l *leaseRetries) failed(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = map[string]*leaseRetry{}
	}
	r, ok := l.keys[key]
	if !ok {
		r = &leaseRetry{bo: backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(l.tick()), backoff.WithMaxInterval(maxLeaseRetry), backoff.WithMaxElapsedTime(0))}
		l.keys[key] = r
	}
	r.next = now.Add(r.bo.NextBackOff())
}

func (l *leaseRetries) ok(key string) {
	l.mu.Lock()
	delete(l.keys, key)
	l.mu.Unlock()
}

// lead is how long before c's deadline its renewal is due.
func (l *leaseRetries) lead(c store.Claim) time.Duration {
	return max(3*l.tick(), min(maxRenewLead, c.Deadline.Sub(c.ClaimedAt)/10))
}
