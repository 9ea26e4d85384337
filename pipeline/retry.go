package pipeline

import (
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// RetryPolicy bounds the retries of one sandboxd claim inside a transaction.
type RetryPolicy struct {
	MaxAttempts     int           // default 4 (1 try + 3 retries)
	MaxElapsed      time.Duration // default 10s
	InitialInterval time.Duration // default 25ms
	MaxInterval     time.Duration // default 1s
}

func (p *RetryPolicy) defaults() {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 4
	}
	if p.MaxElapsed <= 0 {
		p.MaxElapsed = 10 * time.Second
	}
	if p.InitialInterval <= 0 {
		p.InitialInterval = 25 * time.Millisecond
	}
	if p.MaxInterval <= 0 {
		p.MaxInterval = time.Second
	}
}

// backOff is bounded in attempts and in time.
func (p RetryPolicy) backOff() *retryAfterBackOff {
	eb := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.InitialInterval),
		backoff.WithMaxInterval(p.MaxInterval),
		backoff.WithMaxElapsedTime(p.MaxElapsed),
	)
	return &retryAfterBackOff{BackOff: backoff.WithMaxRetries(eb, uint64(p.MaxAttempts-1)), maxElapsed: p.MaxElapsed, start: time.Now()}
}

// retryAfterBackOff honours a server's Retry-After: the next wait is at
// least what the last error asked for, but never past MaxElapsed.
type retryAfterBackOff struct {
	backoff.BackOff
	maxElapsed time.Duration
	start      time.Time
	after      time.Duration
}

func (b *retryAfterBackOff) observe(err error) { b.after = pool.RetryAfter(err) }

func (b *retryAfterBackOff) NextBackOff() time.Duration {
	d := b.BackOff.NextBackOff()
	if d == backoff.Stop {
		return d
	}
	if b.after > d {
		d = b.after
	}
	if time.Since(b.start)+d > b.maxElapsed {
		return backoff.Stop
	}
	return d
}
