package store

import (
	"runtime"
	"sync"
)

// queue is the hand-off from callers to the single writer. It is a slice
// under a mutex rather than a channel so that the writer takes everything
// pending in one step (the group), and so that a caller whose context ends
// can tell whether the writer already owns its request.
type queue struct {
	mu      sync.Mutex
	pending []*request
	closed  bool
	wake    chan struct{} // capacity 1: "pending is not empty, or closed"
}

func (q *queue) push(r *request) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.pending = append(q.pending, r)
	q.mu.Unlock()
	q.signal()
	return nil
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take blocks until requests are pending and returns all of them (withdrawn
// ones dropped), or returns nil once the queue is closed and drained. spare
// is recycled as the next pending slice.
func (q *queue) take(spare []*request) []*request {
	for {
		q.mu.Lock()
		var batch []*request
		if len(q.pending) > 0 {
			batch = q.pending[:0]
			for _, r := range q.pending {
				if !r.cancelled {
					r.taken = true
					batch = append(batch, r)
				}
			}
			clear(q.pending[len(batch):])
			q.pending = spare[:0]
		}
		closed := q.closed
		q.mu.Unlock()
		if len(batch) > 0 {
			return batch
		}
		if batch != nil {
			spare = batch // everything was withdrawn: that slice is free again
		}
		if closed {
			return nil
		}
		<-q.wake
	}
}

// gather lets the woken callers of the batch just acknowledged queue their
// next commits before the writer takes the next batch. They sit in the
// writer's run queue, and without a yield they would wait behind its
// syscalls and miss the batch: batches shrink and fsyncs multiply. It yields
// until all of them are back or the queue stops growing for two yields in a
// row, so an idle store pays two yields per commit, and it never sleeps.
func (q *queue) gather(woken int) {
	target := q.len() + woken
	still := 0
	for range 64 {
		n := q.len()
		if n >= target {
			return
		}
		runtime.Gosched()
		if q.len() > n {
			still = 0
		} else if still++; still == 2 {
			return
		}
	}
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// close stops accepting requests; it reports false if already closed.
func (q *queue) close() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.closed = true
	q.signal()
	return true
}

func (q *queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}
