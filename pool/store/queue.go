package store

import (
	"runtime"
	"sync"
)

// queue is the hand-off from callers to the single writer. It is a slice
// under a mutex rather than a channel so that the writer takes everything
// pending in one step (the group), and so that a caller whose context ends
// can tell whether the writer already owns its request.
//
// inflight is the batch the writer took and has not settled yet (applied to
// the table, or failed): with pending, what a Delete of a key absent from
// the table must wait for if it holds a put of that key.
type queue struct {
	mu       sync.Mutex
	pending  []*request
	inflight []*request
	closed   bool
	wake     chan struct{} // capacity 1: "pending is not empty, or closed"
}

func (q *queue) push(r *request) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return errClosed
	}
	q.pending = append(q.pending, r)
	q.mu.Unlock()
	q.signal()
	return nil
}

// withdraw takes back r, whose caller gave up waiting, unless the writer
// took it already; it reports whether it did.
func (q *queue) withdraw(r *request) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r.taken {
		return false
	}
	r.cancelled = true
	return true
}

// settle ends the batch the writer took once it has applied it to the
// table (or failed it): from then on the table alone says whether its keys
// exist.
func (q *queue) settle() {
	q.mu.Lock()
	q.inflight = nil
	q.mu.Unlock()
}

// absent reports whether a Delete of key has nothing to do: key is not in
// the durable table (durable(key) is false) and no put of it is queued or
// in flight. Both are checked under q.mu, and the writer settles a batch
// under q.mu only after applying it, so a put is never missed in between.
// The scan is O(pending), but only a Delete of an absent key pays it; a
// Put pays nothing for it. The lock order is q.mu, then the table's lock.
func (q *queue) absent(key string, durable func(string) bool) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false, errClosed
	}
	for _, batch := range [2][]*request{q.inflight, q.pending} {
		for _, r := range batch {
			for i := range r.ops {
				if op := &r.ops[i]; !op.del && op.key == key && !r.cancelled {
					return false, nil
				}
			}
		}
	}
	return !durable(key), nil
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
		if len(batch) > 0 {
			q.inflight = batch
		}
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

// gatherOn is false only in BenchmarkCommit's gather=off.
var gatherOn = true

// gather lets the woken callers of the batch just acknowledged queue their
// next commits before the writer takes the next batch. They sit in the
// writer's run queue, and without a yield they would wait behind its
// syscalls and miss the batch: batches shrink and fsyncs multiply. It yields
// until all of them are back or the queue stops growing for two yields in a
// row, so an idle store pays two yields per commit, and it never sleeps.
//
// BenchmarkCommit's gather=off turns it off (gatherOn), to show what it
// earns at node scale (bench/HISTORY.md).
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
