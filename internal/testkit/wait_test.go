package testkit

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	WaitFor(t, 5*time.Second, "the third look", func() bool { return n.Add(1) >= 3 })
	if n.Load() != 3 {
		t.Fatalf("cond asked %d times, want 3 (it returns as soon as cond holds)", n.Load())
	}
}

// fakeTB records a Fatalf instead of stopping the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}

func fails(t *testing.T, run func(tb testing.TB)) string {
	t.Helper()
	f := &fakeTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != any(f) {
				panic(r)
			}
		}()
		run(f)
	}()
	return f.failed
}

func TestForFailsAtTheDeadlineAndOnAnError(t *testing.T) {
	if msg := fails(t, func(tb testing.TB) { WaitFor(tb, 20*time.Millisecond, "never", func() bool { return false }) }); msg == "" {
		t.Error("a condition that never holds did not fail the test")
	}
	if msg := fails(t, func(tb testing.TB) {
		WaitForCtx(tb, time.Minute, "broken", func(context.Context) (bool, error) { return false, errors.New("boom") })
	}); msg == "" {
		t.Error("an error from the condition did not fail the test")
	}
}
