package store

import (
	"sync"
	"sync/atomic"
)

// heldCompactor blocks the compactor at its "rewrite" failpoint until
// release is closed, and fails the next commit's write once failWrite is set.
type heldCompactor struct {
	entered   chan struct{} // closed when the compactor reaches the failpoint
	release   chan struct{}
	once      sync.Once
	failWrite atomic.Bool
}

func newHeldCompactor() *heldCompactor {
	return &heldCompactor{entered: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldCompactor) failpoint(point string) error {
	switch point {
	case "rewrite":
		h.once.Do(func() { close(h.entered) })
		<-h.release
	case "write":
		if h.failWrite.CompareAndSwap(true, false) {
			return errInjected
		}
	}
	return nil
}
