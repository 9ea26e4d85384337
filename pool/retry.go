package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// RetryPolicy bounds the retries of the idempotent calls (Release, List,
// Get, Info). Claim is never retried here. Zero fields take the defaults.
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

// Defaults for RetryPolicy.
const (
	DefaultMaxAttempts     = 5
	DefaultMaxElapsed      = 10 * time.Second
	DefaultInitialInterval = 50 * time.Millisecond
	DefaultMaxInterval     = 2 * time.Second
)

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MaxElapsed <= 0 {
		p.MaxElapsed = DefaultMaxElapsed
	}
	if p.InitialInterval <= 0 {
		p.InitialInterval = DefaultInitialInterval
	}
	if p.MaxInterval <= 0 {
		p.MaxInterval = DefaultMaxInterval
	}
	p.MaxInterval = max(p.MaxInterval, p.InitialInterval)
	return p
}

// withRetry runs op until it succeeds, fails permanently (IsRetryable is
// false), or the policy or ctx runs out. Every retry adds a "sandboxd.retry"
// event to the caller's current span.
//
// When ctx ends during a wait, the result wraps the context error (so
// errors.Is(err, context.DeadlineExceeded) holds and IsRetryable is false)
// and names the last attempt's error in its text.
func (c *Client) withRetry(ctx context.Context, verb string, op func() error) error {
	p := c.retry
	exp := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.InitialInterval),
		backoff.WithMaxInterval(p.MaxInterval),
		backoff.WithMaxElapsedTime(p.MaxElapsed),
	)
	hint := &hintedBackOff{exp: exp, ctx: ctx, maxElapsed: p.MaxElapsed}
	b := backoff.WithContext(backoff.WithMaxRetries(hint, uint64(p.MaxAttempts-1)), ctx)

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
		hint.floor = RetryAfter(err)
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

// hintedBackOff is the exponential backoff with a floor: a server's
// Retry-After is waited out in full, never undercut by a shorter interval.
// Two bounds still win over the hint: MaxElapsed, and the caller's deadline.
// When the next wait would outlive either, it stops now and the caller gets
// the real error at once instead of a context error after a useless sleep.
//
// Not safe for concurrent use; each call builds its own.
type hintedBackOff struct {
	exp        *backoff.ExponentialBackOff
	ctx        context.Context
	maxElapsed time.Duration
	floor      time.Duration // Retry-After of the last failure, consumed once
}

func (h *hintedBackOff) NextBackOff() time.Duration {
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

func (h *hintedBackOff) Reset() {
	h.exp.Reset()
	h.floor = 0
}
