package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// RetryPolicy bounds retries against sandboxd: the client's own retries of
// the idempotent calls (Release, List, Get, Info), and the pipeline's
// retries of a claim, which it looks up before each (Claim is never retried
// inside the client). Zero fields take the defaults.
type RetryPolicy struct {
	// MaxAttempts counts the first attempt too; 1 disables retries.
	// Default 5.
	MaxAttempts int
	// MaxElapsed bounds the whole call, waits included. Default 10s.
	MaxElapsed time.Duration
	// InitialInterval and MaxInterval shape the exponential backoff
	// (multiplier 1.5, ±50% jitter). Defaults 50ms and 2s.
	InitialInterval, MaxInterval time.Duration
}

// defaultRetry is the client's policy for the idempotent calls.
var defaultRetry = RetryPolicy{MaxAttempts: 5, MaxElapsed: 10 * time.Second, InitialInterval: 50 * time.Millisecond, MaxInterval: 2 * time.Second}

// Or returns p with every zero (or negative) field taken from d.
func (p RetryPolicy) Or(d RetryPolicy) RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.MaxElapsed <= 0 {
		p.MaxElapsed = d.MaxElapsed
	}
	if p.InitialInterval <= 0 {
		p.InitialInterval = d.InitialInterval
	}
	if p.MaxInterval <= 0 {
		p.MaxInterval = d.MaxInterval
	}
	p.MaxInterval = max(p.MaxInterval, p.InitialInterval)
	return p
}

// withDefaults returns p with every zero field taken from defaultRetry.
func (p RetryPolicy) withDefaults() RetryPolicy { return p.Or(defaultRetry) }

// withRetry runs op until it succeeds, fails permanently (IsRetryable is
// false), or the policy or ctx runs out. Every retry adds a "sandboxd.retry"
// event to the caller's current span.
//
// When ctx ends during a wait, the result wraps the context error (so
// errors.Is(err, context.DeadlineExceeded) holds and IsRetryable is false)
// and names the last attempt's error in its text.
func (c *Client) withRetry(ctx context.Context, verb string, op func() error) error {
	hint := c.retry.NewBackOff(ctx)
	b := backoff.WithContext(hint, ctx)

	span := trace.SpanFromContext(ctx)
	attempt := 0
	var last error
	err := backoff.RetryNotify(func() error {
		attempt++
		err := op()
		if err == nil {
			return nil
		}
		last = err
		if !IsRetryable(err) {
			return backoff.Permanent(err)
		}
		hint.Observe(err)
		return err
	}, b, func(err error, wait time.Duration) {
		span.AddEvent("sandboxd.retry", trace.WithAttributes(
			attribute.String("sandboxd.verb", verb),
			attribute.Int("attempt", attempt),
			attribute.String("error", err.Error()), // already scrubbed
			attribute.Int64("wait_ms", wait.Milliseconds()),
		))
	})
	if err != nil && last != nil && err != last {
		// backoff returned ctx.Err() and dropped what actually failed.
		return fmt.Errorf("sandboxd %s: gave up after %d attempts: %w (last error: %v)", verb, attempt, err, last)
	}
	return err
}

// BackOff is the policy's exponential backoff (a backoff.BackOff) with a
// floor: a server's Retry-After, passed in with Observe, is waited out in
// full, never undercut by a shorter interval. The attempt limit,
// MaxElapsed and the caller's deadline still win over the hint: when the
// next wait would outlive either time bound, it stops now and the caller
// gets the real error at once instead of a context error after a useless
// sleep. It is the one retry schedule for every sandboxd call.
//
// Not safe for concurrent use; each call builds its own.
type BackOff struct {
	exp        *backoff.ExponentialBackOff
	ctx        context.Context
	maxElapsed time.Duration
	left       uint64        // retries left (MaxAttempts-1 at the start)
	retries    uint64        // the policy's MaxAttempts-1, for Reset
	floor      time.Duration // Retry-After of the last failure, consumed once
}

// NewBackOff starts the schedule of one call made under ctx.
func (p RetryPolicy) NewBackOff(ctx context.Context) *BackOff {
	p = p.withDefaults()
	exp := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.InitialInterval),
		backoff.WithMaxInterval(p.MaxInterval),
		backoff.WithMaxElapsedTime(p.MaxElapsed),
	)
	n := uint64(p.MaxAttempts - 1)
	return &BackOff{exp: exp, ctx: ctx, maxElapsed: p.MaxElapsed, left: n, retries: n}
}

// Observe records the failure the next wait follows: its Retry-After, if
// any, becomes that wait's floor.
func (h *BackOff) Observe(err error) { h.floor = retryAfter(err) }

func (h *BackOff) NextBackOff() time.Duration {
	if h.left == 0 {
		return backoff.Stop
	}
	h.left--
	next := h.exp.NextBackOff()
	if next == backoff.Stop {
		return backoff.Stop
	}
	floor := h.floor
	h.floor = 0
	if floor > next {
		if h.exp.GetElapsedTime()+floor > h.maxElapsed {
			return backoff.Stop
		}
		next = floor
	}
	if dl, ok := h.ctx.Deadline(); ok && time.Until(dl) < next {
		return backoff.Stop
	}
	return next
}

func (h *BackOff) Reset() {
	h.exp.Reset()
	h.left = h.retries
	h.floor = 0
}
