package pipeline

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// queued is the intent recorded for one UID plus its trace context.
type queued struct {
	intent   Intent
	version  uint64          // bumped by every newer intent for this UID
	ctx      context.Context // carries the open transaction span; never cancelled
	root     trace.Span
	received time.Time // when this attempt's event was received
	enqueued time.Time // when it entered the queue (queue-wait span start)
}

// shard is one client-go workqueue plus the intents its items stand for.
// The queue item is the Pod UID.
//
// Ordering guarantee (this is its one statement; docs link here): a UID is
// never processed by two workers at once, and an intent recorded while its
// UID is being processed is processed again afterwards. The workqueue's
// dirty/processing rule gives both. A repeated event for a UID that is
// already held replaces its intent (update) and takes no new slot, so
// duplicate creates need no further deduplication.
//
// Backpressure: at most depth UIDs may hold an intent at once, so memory
// stays bounded however fast Pods arrive. A new UID never waits for a slot
// (put fails at once with errShardFull): CreatePod runs on virtual-kubelet's
// shared workers, and a worker blocked there would also stop the deletes
// that free slots. Engine.Create defers such a UID instead.
type shard struct {
	id    int
	q     workqueue.TypedRateLimitingInterface[string]
	slots chan struct{}

	mu      sync.Mutex
	intents map[string]*queued
}

func newShard(id, depth int, minRetry, maxRetry time.Duration, clk clock.WithTicker) *shard {
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](minRetry, maxRetry)
	// The retry delays (AddRateLimited) run on Config.Clock like every other
	// time the engine reads. No Name: a named queue reports to client-go's
	// process-wide metrics provider, which k8s.io/apiserver sets to the
	// component-base legacy registry that this node never serves, at the
	// cost of clock reads on every Add and Get and a goroutine per shard.
	cfg := workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk}
	return &shard{
		id:      id,
		q:       workqueue.NewTypedRateLimitingQueueWithConfig[string](rl, cfg),
		slots:   make(chan struct{}, depth),
		intents: map[string]*queued{},
	}
}

// put records the intent of a UID that update did not find, and queues it.
func (s *shard) put(q *queued) error {
	uid := q.intent.Ref.UID
	select {
	case s.slots <- struct{}{}:
	default:
		return errShardFull
	}
	s.mu.Lock()
	if cur, ok := s.intents[uid]; ok { // lost a race with another put
		cur.intent, cur.version = q.intent, cur.version+1
		s.mu.Unlock()
		<-s.slots
		q.root.End()
	} else {
		s.intents[uid] = q
		s.mu.Unlock()
	}
	s.q.Add(uid)
	return nil
}

// update replaces the intent of a UID that is already held and queues it
// again; the open transaction span stays the one the first event started.
func (s *shard) update(it Intent) bool {
	s.mu.Lock()
	cur, ok := s.intents[it.Ref.UID]
	if ok {
		cur.intent, cur.version = it, cur.version+1
	}
	s.mu.Unlock()
	if ok {
		s.q.Add(it.Ref.UID)
	}
	return ok
}

// get returns a copy of the intent for uid.
func (s *shard) get(uid string) (queued, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.intents[uid]
	if !ok {
		return queued{}, false
	}
	return *q, true
}

// finish drops the intent once it is served, unless a newer one arrived
// meanwhile (that one is already queued again by the workqueue).
func (s *shard) finish(uid string, version uint64) {
	s.mu.Lock()
	q, ok := s.intents[uid]
	if ok && q.version == version {
		delete(s.intents, uid)
	}
	s.mu.Unlock()
	if ok && q.version == version {
		<-s.slots
		s.q.Forget(uid)
	}
}

// renew starts the next attempt's transaction span for a retried UID.
func (s *shard) renew(uid string, next func(prev queued) (context.Context, trace.Span)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.intents[uid]; ok {
		q.ctx, q.root = next(*q)
		q.received = time.Now()
		q.enqueued = q.received
	}
}

// cancel drops any intent for uid: a deleted Pod must never be claimed for.
func (s *shard) cancel(uid string) {
	s.mu.Lock()
	q, ok := s.intents[uid]
	delete(s.intents, uid)
	s.mu.Unlock()
	if ok {
		<-s.slots
		s.q.Forget(uid)
		q.root.End()
	}
}

func (s *shard) depth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.intents)
}
