package store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blockingFsync holds the writer inside its first fsync after arm (Open's
// own fsync of a new log's header comes before) until released. waiting is
// closed once a caller whose context ended waits for a request the writer
// had already taken.
type blockingFsync struct {
	entered chan struct{}
	release chan struct{}
	waiting chan struct{}
	armed   atomic.Bool
	fired   atomic.Bool
	once    sync.Once
}

func newBlockingFsync() *blockingFsync {
	return &blockingFsync{entered: make(chan struct{}), release: make(chan struct{}), waiting: make(chan struct{})}
}

func (b *blockingFsync) failpoint(point string) error {
	switch {
	case point == "fsyncFile" && b.armed.Load() && b.fired.CompareAndSwap(false, true):
		b.entered <- struct{}{}
		<-b.release
	case point == "cancelledAfterTake":
		b.once.Do(func() { close(b.waiting) })
	}
	return nil
}

// within waits for ch to be closed or to deliver, and fails the test if it
// does not within 10s.
func within[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
