package telemetry

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// kubeInstruments meter the provider's side of the apiserver: the queues
// of virtual-kubelet's pod controller, and client-go's REST requests. A
// throttled client shows in rest_client_rate_limiter_duration_seconds, a
// backed-up or stuck queue in vksandbox_vk_queue_items and
// vksandbox_vk_queue_oldest_item_seconds.
type kubeInstruments struct {
	vkAdds, vkRetries metric.Int64Counter
	vkItemDuration    metric.Float64Histogram
	vkItems           metric.Int64ObservableGauge
	vkOldest          metric.Float64ObservableGauge
	vkQueuesFn        atomic.Pointer[func() []QueueStat]

	restRequests    metric.Int64Counter
	restDuration    metric.Float64Histogram
	restRateLimiter metric.Float64Histogram

	restLatencyAttrs attrCache[restKey] // {verb, host}
	restResultAttrs  attrCache[restKey] // {code, method, host}
}

// QueueStat is one virtual-kubelet queue at scrape time.
type QueueStat struct {
	Name   string
	Items  int           // added and not yet finished: waiting, backing off or in progress
	Oldest time.Duration // age of the oldest of those; 0 when there is none
}

// init creates the instruments in k, and returns those read by the
// scrape callback.
func (k *kubeInstruments) init(meter metric.Meter) ([]metric.Observable, error) {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(latencyBuckets...))
		errs = append(errs, err)
		return h
	}
	k.vkAdds = counter("vksandbox_vk_queue_adds_total", "{item}", "Items added to a virtual-kubelet queue (a key already waiting is not added again).")
	k.vkRetries = counter("vksandbox_vk_queue_retries_total", "{item}", "Items put back on a virtual-kubelet queue after a failed sync.")
	k.vkItemDuration = seconds("vksandbox_vk_queue_item_duration_seconds", "Time from an item's add to its end (synced, or given up), retries included.")
	var err error
	k.vkItems, err = meter.Int64ObservableGauge("vksandbox_vk_queue_items", metric.WithUnit("{item}"),
		metric.WithDescription("Items of a virtual-kubelet queue added and not yet finished: waiting, backing off or in progress."))
	errs = append(errs, err)
	k.vkOldest, err = meter.Float64ObservableGauge("vksandbox_vk_queue_oldest_item_seconds", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest unfinished item of a virtual-kubelet queue (0 when empty)."))
	errs = append(errs, err)
	k.restRequests = counter("rest_client_requests_total", "{request}", "Kubernetes API requests by status code, method and host (client-go).")
	k.restDuration = seconds("rest_client_request_duration_seconds", "Kubernetes API request latency by verb and host (client-go).")
	k.restRateLimiter = seconds("rest_client_rate_limiter_duration_seconds",
		"Time a Kubernetes API request waited for client-go's rate limiter (--kube-api-qps), by verb and host.")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return []metric.Observable{k.vkItems, k.vkOldest}, nil
}

func (k *kubeInstruments) observe(o metric.Observer) {
	f := k.vkQueuesFn.Load()
	if f == nil {
		return
	}
	for _, q := range (*f)() {
		a := metric.WithAttributes(attribute.String("queue", q.Name))
		o.ObserveInt64(k.vkItems, int64(q.Items), a)
		o.ObserveFloat64(k.vkOldest, q.Oldest.Seconds(), a)
	}
}

// VKQueueMeter meters one of virtual-kubelet's queues. Its attribute set
// is built once, by Metrics.VKQueue: an item passes through Add and Done on
// every Pod's create and status write, and building the set per call was
// most of what metering them cost.
type VKQueueMeter struct {
	m     *Metrics
	attrs metric.MeasurementOption
}

// VKQueue returns the meter of virtual-kubelet's queue named queue, one of
// its fixed queue names. A nil Metrics gives a meter that records nothing.
func (m *Metrics) VKQueue(queue string) VKQueueMeter {
	if m == nil {
		return VKQueueMeter{}
	}
	return VKQueueMeter{m: m, attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("queue", queue)))}
}

// Add counts an item added to the queue, or put back for a retry.
func (q VKQueueMeter) Add(retry bool) {
	if q.m == nil {
		return
	}
	if retry {
		q.m.kube.vkRetries.Add(context.Background(), 1, q.attrs)
		return
	}
	q.m.kube.vkAdds.Add(context.Background(), 1, q.attrs)
}

// Done records an item of the queue finished, d after it was added.
func (q VKQueueMeter) Done(d time.Duration) {
	if q.m == nil {
		return
	}
	q.m.kube.vkItemDuration.Record(context.Background(), d.Seconds(), q.attrs)
}

// RegisterVKQueues sets the function read at scrape time for
// vksandbox_vk_queue_items and vksandbox_vk_queue_oldest_item_seconds. It
// runs on the scrape goroutine, so it must be cheap and must not block. A
// later call replaces the earlier function.
func (m *Metrics) RegisterVKQueues(f func() []QueueStat) {
	if m == nil || f == nil {
		return
	}
	m.kube.vkQueuesFn.Store(&f)
}

// client-go's REST metrics are process-wide hooks that can be set once
// (clientmetrics.Register), so they report to whichever Metrics called
// MeterKubeClients last.
var (
	kubeClientOnce    sync.Once
	kubeClientMetrics atomic.Pointer[Metrics]
)

// MeterKubeClients makes client-go report every Kubernetes API request of
// this process to m: rest_client_requests_total, its latency, and its wait
// for the client-side rate limiter. Call it before the first client is
// built.
func (m *Metrics) MeterKubeClients() {
	if m == nil {
		return
	}
	kubeClientMetrics.Store(m)
	kubeClientOnce.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestLatency:     restLatency{rateLimiter: false},
			RateLimiterLatency: restLatency{rateLimiter: true},
			RequestResult:      restResult{},
		})
	})
}

type restLatency struct{ rateLimiter bool }

func (r restLatency) Observe(ctx context.Context, verb string, u url.URL, d time.Duration) {
	m := kubeClientMetrics.Load()
	if m == nil {
		return
	}
	h := m.kube.restDuration
	if r.rateLimiter {
		h = m.kube.restRateLimiter
	}
	h.Record(ctx, d.Seconds(), m.kube.restLatencyAttrs.get(restKey{verb: verb, host: u.Host}, restLatencySet))
}

type restResult struct{}

func (restResult) Increment(ctx context.Context, code, method, host string) {
	if m := kubeClientMetrics.Load(); m != nil {
		m.kube.restRequests.Add(ctx, 1, m.kube.restResultAttrs.get(restKey{code: code, verb: method, host: host}, restResultSet))
	}
}
