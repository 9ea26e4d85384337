package telemetry

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// latencyBuckets span 100µs (a cache-hit claim) to 10s (a sandboxd call
// at its timeout). Shared by every duration histogram so panels line up.
var latencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// batchBuckets cover group commit from a lone claim to a large burst.
var batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// Metrics holds every instrument of the product. Callers use its methods
// and never an instrument name, so names and labels live in this file only.
//
// Methods taking a ctx attach an exemplar (the trace id) when the ctx holds
// a sampled span. All methods are safe for concurrent use, and a nil
// *Metrics is a valid no-op, so a component built without telemetry works.
type Metrics struct {
	claimDuration      metric.Float64Histogram
	sandboxdRequests   metric.Int64Counter
	sandboxdDuration   metric.Float64Histogram
	storeFsync         metric.Float64Histogram
	storeBatch         metric.Int64Histogram
	storeBytes         metric.Int64Counter
	storeCompactions   metric.Int64Counter
	storeCompactTime   metric.Float64Histogram
	decisions          metric.Int64Counter
	orphanSandboxes    metric.Int64Gauge
	orphanClaims       metric.Int64Gauge
	foreignSandboxes   metric.Int64Gauge
	podWatchEnds       metric.Int64Counter
	orphanScans        metric.Int64Counter
	loopPasses         metric.Float64Histogram
	inventoryPublishes metric.Int64Counter
	eventsShed         metric.Int64Counter
	pipelineShards     metric.Int64Gauge
	workersPerShard    metric.Int64Gauge
	buildInfo          metric.Int64Gauge
	sandboxdFeature    metric.Int64Gauge
	queueDepth         metric.Int64ObservableGauge
	claims             metric.Int64ObservableGauge
	kube               kubeInstruments
	sessions           sessionInstruments

	// Read at scrape time by the single registered callback. Swapping a
	// pointer (instead of registering a callback per call) makes
	// re-registration replace rather than double-report.
	queueDepthFn atomic.Pointer[func() []int]
	claimsFn     atomic.Pointer[func() (held, quarantined, tentative int)]

	// Built-once label sets per label combination (labels.go).
	outcomeAttrs  attrCache[string]
	verbAttrs     attrCache[string]
	requestAttrs  attrCache[verbCode]
	decisionAttrs attrCache[[2]string]
	reasonAttrs   attrCache[string]
	loopAttrs     attrCache[string]
}

// NewNopMetrics returns Metrics that record nothing, for unit tests.
func NewNopMetrics() *Metrics {
	m, err := newMetrics(noop.NewMeterProvider().Meter(TracerName))
	if err != nil {
		panic(err) // the noop meter cannot fail
	}
	return m
}

func newMetrics(meter metric.Meter) (*Metrics, error) {
	m := &Metrics{}
	var errs []error
	f64h := func(name, unit, desc string, b []float64) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(b...))
		errs = append(errs, err)
		return h
	}
	i64c := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	i64g := func(name, unit, desc string) metric.Int64Gauge {
		g, err := meter.Int64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}

	// Names are spelled exactly as exposed, so grepping a series name from
	// a dashboard lands here; the exporter recognises the "_seconds",
	// "_bytes" and "_total" suffixes its unit and kind rules would add and
	// does not repeat them (TestMetricsExposeEverySeries pins this).
	m.claimDuration = f64h("vksandbox_claim_duration_seconds", "s", "Claim transaction latency, Pod event to outcome.", latencyBuckets)
	m.sandboxdRequests = i64c("vksandbox_sandboxd_requests_total", "{request}", "sandboxd HTTP calls by verb and status code (0: no response).")
	m.sandboxdDuration = f64h("vksandbox_sandboxd_request_duration_seconds", "s", "sandboxd HTTP call latency by verb.", latencyBuckets)
	m.storeFsync = f64h("vksandbox_store_fsync_duration_seconds", "s", "Claim store commit fsync latency.", latencyBuckets)
	h, err := meter.Int64Histogram("vksandbox_store_commit_batch_size", metric.WithUnit("{record}"),
		metric.WithDescription("Commit requests (callers) acknowledged per durable group commit."), metric.WithExplicitBucketBoundaries(batchBuckets...))
	errs = append(errs, err)
	m.storeBatch = h
	m.storeBytes = i64c("vksandbox_store_commit_bytes_total", "By", "Bytes written by claim store commits.")
	m.storeCompactions = i64c("vksandbox_store_compactions_total", "{compaction}", "Claim store compactions by result.")
	m.storeCompactTime = f64h("vksandbox_store_compaction_duration_seconds", "s", "Claim store compaction time, snapshot to switch (or failure).", latencyBuckets)
	m.decisions = i64c("vksandbox_decisions_total", "{decision}", "Lifecycle decisions on claims by kind and reason.")
	m.orphanSandboxes = i64g("vksandbox_orphan_sandboxes", "{sandbox}", "Sandboxes sandboxd holds for this node that no claim knows, at the last scan.")
	m.orphanClaims = i64g("vksandbox_orphan_claims", "{claim}", "Claims whose sandbox sandboxd no longer reports, at the last scan.")
	m.foreignSandboxes = i64g("vksandbox_foreign_sandboxes", "{sandbox}", "Sandboxes under this node's claim_ref form without its mark (another client's), at the last scan.")
	m.orphanScans = i64c("vksandbox_orphan_scans_total", "{scan}", "Orphan scans by result.")
	m.podWatchEnds = i64c("vksandbox_pod_watch_ends_total", "{watch}", "Ends of the node's Pod watch made by the apiserver: resumed from the same resourceVersion, or handed back to client-go's reflector.")
	m.loopPasses = f64h("vksandbox_loop_pass_seconds", "s", "Passes of the pipeline's background loops by loop, and how long each took.", latencyBuckets)
	m.inventoryPublishes = i64c("vksandbox_inventory_publishes_total", "{publish}", "NodeInventory publishes by result.")
	m.eventsShed = i64c("vksandbox_events_shed_total", "{event}", "Normal Events not recorded because they exceeded the node's Event budget (--event-qps, --event-burst), by reason.")
	m.pipelineShards = i64g("vksandbox_pipeline_shards", "{shard}", "Configured pipeline shards.")
	m.workersPerShard = i64g("vksandbox_pipeline_workers_per_shard", "{worker}", "Configured workers per pipeline shard.")
	m.buildInfo = i64g("vksandbox_build_info", "{build}", "Always 1; its labels are the binary's version, commit and Go version.")
	m.sandboxdFeature = i64g("vksandbox_sandboxd_feature", "{feature}", "1 when the node's sandboxd has the feature and this node's token may use it, 0 when not; absent until detected.")

	qd, err := meter.Int64ObservableGauge("vksandbox_queue_depth", metric.WithUnit("{item}"), metric.WithDescription("Pending items per pipeline shard."))
	errs = append(errs, err)
	m.queueDepth = qd
	cl, err := meter.Int64ObservableGauge("vksandbox_claims", metric.WithUnit("{claim}"), metric.WithDescription("Claims held by this node, by state."))
	errs = append(errs, err)
	m.claims = cl
	observables, err := m.kube.init(meter)
	errs = append(errs, err)
	sessionObservables, err := m.sessions.init(meter)
	errs = append(errs, err)
	observables = append(observables, sessionObservables...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if _, err := meter.RegisterCallback(m.observe, append(observables, m.queueDepth, m.claims)...); err != nil {
		return nil, err
	}
	return m, nil
}

// ClaimLatency records one finished claim transaction. outcome is one of
// pipeline.Outcomes: a label value outside a fixed set is a cardinality
// leak.
func (m *Metrics) ClaimLatency(ctx context.Context, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.claimDuration.Record(ctx, d.Seconds(), m.outcomeAttrs.get(outcome, outcomeSet))
}

// SandboxdRequest records one sandboxd HTTP call. status is the HTTP status,
// or 0 when no response arrived (dial error, timeout).
func (m *Metrics) SandboxdRequest(ctx context.Context, verb string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.sandboxdRequests.Add(ctx, 1, m.requestAttrs.get(verbCode{verb, status}, requestSet))
	m.sandboxdDuration.Record(ctx, d.Seconds(), m.verbAttrs.get(verb, verbSet))
}

// StoreCommit records one durable group commit of batch records and bytes
// bytes whose fsync took fsync. It has no ctx: a batch serves many claims,
// so no single trace owns it.
func (m *Metrics) StoreCommit(batch int, bytes int, fsync time.Duration) {
	if m == nil {
		return
	}
	ctx := context.Background()
	m.storeFsync.Record(ctx, fsync.Seconds())
	m.storeBatch.Record(ctx, int64(batch))
	m.storeBytes.Add(ctx, int64(bytes))
}

// StoreCompaction records one compaction of the state file: installed (ok)
// or failed, and the time from its snapshot to that point. Commits go on
// during a compaction, so this is not time the claim path waited.
func (m *Metrics) StoreCompaction(took time.Duration, ok bool) {
	if m == nil {
		return
	}
	ctx := context.Background()
	m.storeCompactions.Add(ctx, 1, result(ok))
	m.storeCompactTime.Record(ctx, took.Seconds())
}

// Decision counts one lifecycle decision. kind is one of
// pipeline.DecisionKinds; reason must come from a small fixed set, never
// an error string.
func (m *Metrics) Decision(ctx context.Context, kind, reason string) {
	if m == nil {
		return
	}
	m.decisions.Add(ctx, 1, m.decisionAttrs.get([2]string{kind, reason}, decisionSet))
}

// LoopPass records the end of one pass of a background loop. loop is one
// of the pipeline.Loop* names: a fixed set.
func (m *Metrics) LoopPass(loop string, took time.Duration) {
	if m == nil {
		return
	}
	m.loopPasses.Record(context.Background(), took.Seconds(), m.loopAttrs.get(loop, loopSet))
}

// OrphanVerdicts publishes the result of the last completed orphan scan.
func (m *Metrics) OrphanVerdicts(unknownSandboxes, missingClaims, foreignSandboxes int) {
	if m == nil {
		return
	}
	m.orphanSandboxes.Record(context.Background(), int64(unknownSandboxes))
	m.orphanClaims.Record(context.Background(), int64(missingClaims))
	m.foreignSandboxes.Record(context.Background(), int64(foreignSandboxes))
}

// PodWatchEnded counts one end of the node's Pod watch that the apiserver
// made: resumed at once (it ended before delivering anything) or handed
// back to client-go's reflector.
func (m *Metrics) PodWatchEnded(resumed bool) {
	if m == nil {
		return
	}
	o := watchHanded
	if resumed {
		o = watchResumed
	}
	m.podWatchEnds.Add(context.Background(), 1, o)
}

// OrphanScan counts one orphan scan attempt. A failed scan leaves the
// OrphanVerdicts gauges at their previous values.
func (m *Metrics) OrphanScan(ok bool) {
	if m == nil {
		return
	}
	m.orphanScans.Add(context.Background(), 1, result(ok))
}

// InventoryPublish counts one NodeInventory publish attempt.
func (m *Metrics) InventoryPublish(ok bool) {
	if m == nil {
		return
	}
	m.inventoryPublishes.Add(context.Background(), 1, result(ok))
}

// EventShed counts one Normal Event the node's Event budget left
// unrecorded. reason is the Event's reason, from the code's fixed set.
func (m *Metrics) EventShed(reason string) {
	if m == nil {
		return
	}
	m.eventsShed.Add(context.Background(), 1, m.reasonAttrs.get(reason, reasonSet))
}

// RegisterBuildInfo publishes vksandbox_build_info{version,commit,go_version} 1,
// so a dashboard or an alert can tell which build runs on each node.
func (m *Metrics) RegisterBuildInfo(version, commit, goVersion string) {
	if m == nil {
		return
	}
	m.buildInfo.Record(context.Background(), 1, metric.WithAttributes(
		attribute.String("version", version), attribute.String("commit", commit), attribute.String("go_version", goVersion)))
}

// SandboxdFeatures publishes vksandbox_sandboxd_feature{feature} 1 or 0
// for each feature detected on the node's sandboxd.
func (m *Metrics) SandboxdFeatures(has map[string]bool) {
	if m == nil {
		return
	}
	for name, ok := range has {
		v := int64(0)
		if ok {
			v = 1
		}
		m.sandboxdFeature.Record(context.Background(), v, metric.WithAttributes(attribute.String("feature", name)))
	}
}

// RegisterWorkers publishes the pipeline's configured shape, so queue depth
// can be read against capacity.
func (m *Metrics) RegisterWorkers(shards, workersPerShard int) {
	if m == nil {
		return
	}
	m.pipelineShards.Record(context.Background(), int64(shards))
	m.workersPerShard.Record(context.Background(), int64(workersPerShard))
}

// RegisterQueueDepth sets the function read at scrape time for
// vksandbox_queue_depth{shard}: element i is shard i's depth. It runs on the
// scrape goroutine, so it must be cheap and must not block. A later call
// replaces the earlier function.
func (m *Metrics) RegisterQueueDepth(f func() []int) {
	if m == nil || f == nil {
		return
	}
	m.queueDepthFn.Store(&f)
}

// RegisterClaims sets the function read at scrape time for
// vksandbox_claims{state}. Same rules as RegisterQueueDepth.
func (m *Metrics) RegisterClaims(f func() (held, quarantined, tentative int)) {
	if m == nil || f == nil {
		return
	}
	m.claimsFn.Store(&f)
}

func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	if f := m.queueDepthFn.Load(); f != nil {
		for i, d := range (*f)() {
			o.ObserveInt64(m.queueDepth, int64(d), metric.WithAttributes(attribute.String("shard", strconv.Itoa(i))))
		}
	}
	if f := m.claimsFn.Load(); f != nil {
		held, quar, tent := (*f)()
		o.ObserveInt64(m.claims, int64(held), stateHeld)
		o.ObserveInt64(m.claims, int64(quar), stateQuar)
		o.ObserveInt64(m.claims, int64(tent), stateTent)
	}
	m.kube.observe(o)
	m.sessions.observe(o)
	return nil
}
