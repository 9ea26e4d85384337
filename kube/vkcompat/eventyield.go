package vkcompat

// Event writes that yield to the claim path (docs/virtual-kubelet.md, 20).
//
// Behaviour: client-go's broadcaster writes each Event as soon as it is
// recorded, one at a time per node. In a burst a node's Normal Events
// (SandboxClaimed, one per Pod) are apiserver writes that compete with the
// status writes of the Pods still waiting to go Running.
// Pinned by: TestANormalEventWaitsWhileTheNodeIsBusy,
// TestANormalEventWaitsNoLongerThanMaxWait,
// TestWarningsAndAnIdleNodeAreWrittenAtOnce, TestStopEndsTheWait, and
// end to end (the node's wiring) TestSandboxClaimedEventIsWrittenOnceTheNodeIsIdle.

import (
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/cocoonstack/vk-sandbox/telemetry"
)

// yieldPoll is how often a waiting Event asks whether the node is still
// busy: a few cheap counter reads, on the broadcaster's goroutine only.
const yieldPoll = 20 * time.Millisecond

// YieldingSink is an Event sink whose Normal Events wait while the node is
// busy (Pods waiting for a claim or a status write), each for at most
// maxWait after it was recorded, so informational writes never delay the
// claims they describe. Warnings are written at once.
//
// Waiting happens on the broadcaster's one writing goroutine, whose queue
// drops Events past 1,000 without a word: the Event budget must keep
// qps × maxWait + burst below that (the flags' check).
type YieldingSink struct {
	sink    record.EventSink
	maxWait time.Duration
	clock   clock.WithTicker
	metrics *telemetry.Metrics
	busy    atomic.Pointer[func() bool]

	stopOnce sync.Once
	stop     chan struct{}
}

// NewYieldingSink wraps sink. Until SetBusy is called nothing waits. The
// Events waiting are counted in m (vksandbox_events_waiting), which may be
// nil.
func NewYieldingSink(sink record.EventSink, maxWait time.Duration, clk clock.WithTicker, m *telemetry.Metrics) *YieldingSink {
	return &YieldingSink{sink: sink, maxWait: maxWait, clock: clk, metrics: m, stop: make(chan struct{})}
}

// SetBusy sets the function that reports whether the node is busy. It is
// called every few milliseconds while a Normal Event waits, so it must be
// cheap.
func (y *YieldingSink) SetBusy(busy func() bool) { y.busy.Store(&busy) }

// Stop ends every wait, now and later: at shutdown the Events left are
// written at once.
func (y *YieldingSink) Stop() { y.stopOnce.Do(func() { close(y.stop) }) }

func (y *YieldingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	y.yield(e)
	return y.sink.Create(e)
}

func (y *YieldingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	y.yield(e)
	return y.sink.Update(e)
}

func (y *YieldingSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	y.yield(e)
	return y.sink.Patch(e, data)
}

// yield returns once the node is idle, or maxWait after the Event was
// recorded (its LastTimestamp; the call's own time if it has none), or at
// Stop. A Warning never waits.
func (y *YieldingSink) yield(e *corev1.Event) {
	busy := y.busy.Load()
	if e.Type != corev1.EventTypeNormal || busy == nil || y.maxWait <= 0 {
		return
	}
	recorded := e.LastTimestamp.Time
	if recorded.IsZero() {
		recorded = y.clock.Now()
	}
	deadline := recorded.Add(y.maxWait)
	var tick clock.Ticker
	for (*busy)() && y.clock.Now().Before(deadline) {
		if tick == nil {
			tick = y.clock.NewTicker(yieldPoll)
			y.metrics.EventWaiting(1)
			defer func() { tick.Stop(); y.metrics.EventWaiting(-1) }()
		}
		select {
		case <-tick.C():
		case <-y.stop:
			return
		}
	}
}
