// Package testkit holds the helpers every test suite shares (a loopback
// TCP service, Serve and EchoService; a concurrent-safe Buffer). WaitFor is
// their one way to wait for a condition that nothing signals (a counter of
// the emulator, a file, an object in the apiserver): poll it until it
// holds, with a deadline, and fail the test naming what was awaited. It
// never stands in for synchronisation that a channel could give.
package testkit

import (
	"context"
	"testing"
	"time"
)

// Polling starts fast, for in-process conditions that hold within
// microseconds, and backs off to a gentle rate for slow ones.
const (
	firstInterval = 100 * time.Microsecond
	maxInterval   = 50 * time.Millisecond
)

// WaitFor polls cond until it holds, and fails the test if it does not within
// the given time.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	WaitForCtx(t, within, what, func(context.Context) (bool, error) { return cond(), nil })
}

// WaitForCtx is WaitFor with a condition that takes the wait's context (for calls
// that need one) and may fail: an error ends the wait and fails the test.
func WaitForCtx(t testing.TB, within time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ok, err := Eventually(ctx, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	if !ok {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// Eventually polls cond on WaitFor's schedule until it holds, it fails, or
// ctx ends, and says whether it held. It is WaitFor for a caller that
// reports the outcome itself: a goroutine that may not fail the test, or a
// caller that then asserts what is left.
func Eventually(ctx context.Context, cond func(ctx context.Context) (bool, error)) (bool, error) {
	interval := firstInterval
	for {
		ok, err := cond(ctx)
		if err != nil || ok {
			return ok, err
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(interval):
		}
		interval = min(2*interval, maxInterval)
	}
}
