package vkcompat

// The replaced and metered rate limiters (docs/virtual-kubelet.md, 8).
//
// Behaviour: virtual-kubelet gives each pod controller queue client-go's
// default controller limiter (per-item backoff plus a 10 qps / burst 100
// token bucket), and its queues export no metrics.
// Pinned by: TestQueueRetriesBackOffUpToTheCap,
// TestPodControllerQueuesHaveNoTokenBucket, and end to end
// TestMetricsMoveWithClaimsAndDecisions.

import (
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"k8s.io/client-go/util/workqueue"

	"github.com/cocoonstack/vk-sandbox/telemetry"
)

// virtual-kubelet's pod controller queues, by the names NewPodController
// gives them.
const (
	queueSyncPods   = "syncPodsFromKubernetes"
	queueDeletePods = "deletePodsFromKubernetes"
	queuePodStatus  = "syncPodStatusFromProvider"
)

// meteredLimiter is the per-item rate limiter of one virtual-kubelet queue,
// metered. virtual-kubelet's queues are its own, not client-go's, and have
// no metrics; but an item passes through its queue's rate limiter: When as
// it is added (again for each retry), Forget once it is finished. So the
// items between the two are the queue's unfinished work.
//
// One gap: the delete queue adds a Pod's first delete without the rate
// limiter, so that queue shows its retries only.
type meteredLimiter struct {
	workqueue.TypedRateLimiter[any]
	name  string
	meter telemetry.VKQueueMeter

	mu    sync.Mutex
	added map[any]time.Time // item → when it was first added, until Forget
}

func newMeteredLimiter(name string, m *telemetry.Metrics, retryMax time.Duration) *meteredLimiter {
	return &meteredLimiter{
		// Failures back off per item from 5ms to retryMax; there is no
		// global token bucket (ReplaceRateLimiters says why).
		TypedRateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, retryMax),
		name:             name, meter: m.VKQueue(name), added: map[any]time.Time{},
	}
}

func (l *meteredLimiter) When(item any) time.Duration {
	l.mu.Lock()
	_, retry := l.added[item]
	if !retry {
		l.added[item] = time.Now()
	}
	l.mu.Unlock()
	l.meter.Add(retry)
	return l.TypedRateLimiter.When(item)
}

func (l *meteredLimiter) Forget(item any) {
	l.mu.Lock()
	at, ok := l.added[item]
	delete(l.added, item)
	l.mu.Unlock()
	if ok {
		l.meter.Done(time.Since(at))
	}
	l.TypedRateLimiter.Forget(item)
}

// stat is read at scrape time: O(unfinished items), never on the claim path.
func (l *meteredLimiter) stat(now time.Time) telemetry.QueueStat {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := telemetry.QueueStat{Name: l.name, Items: len(l.added)}
	for _, at := range l.added {
		s.Oldest = max(s.Oldest, now.Sub(at))
	}
	return s
}

// ReplaceRateLimiters drops virtual-kubelet's default token bucket (10 qps,
// burst 100) from its three queues: past a burst of 100 Pods it made creates
// and status pushes crawl at 10/s. Failures still back off per item. The
// new limiters also meter the queues (meteredLimiter) into m, which may be
// nil.
func ReplaceRateLimiters(m *telemetry.Metrics, retryMax time.Duration) func(*node.PodControllerConfig) error {
	return func(c *node.PodControllerConfig) error {
		syncQ, deleteQ, statusQ := newMeteredLimiter(queueSyncPods, m, retryMax), newMeteredLimiter(queueDeletePods, m, retryMax), newMeteredLimiter(queuePodStatus, m, retryMax)
		c.SyncPodsFromKubernetesRateLimiter = syncQ
		c.DeletePodsFromKubernetesRateLimiter = deleteQ
		c.SyncPodStatusFromProviderRateLimiter = statusQ
		m.RegisterVKQueues(func() []telemetry.QueueStat {
			now := time.Now()
			return []telemetry.QueueStat{syncQ.stat(now), deleteQ.stat(now), statusQ.stat(now)}
		})
		return nil
	}
}
