package main

import (
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/kube/vkcompat"
	"github.com/cocoonstack/vk-sandbox/telemetry"
)

// eventRecorder builds the node's Event recorder: client-go's broadcasters
// on a client of their own (so a burst of Events never delays a status
// push), one for Normal Events and one for Warnings. Normal Events pass the
// Event budget (--event-qps, --event-burst), and their writes wait while
// the node is busy (--event-yield; the caller sets what busy means through
// sink). With --normal-events=false only Warnings are recorded. stop ends
// the waits and the broadcasters.
func eventRecorder(cfg *config, rc *rest.Config, m *telemetry.Metrics, log *slog.Logger) (r record.EventRecorder, sink *vkcompat.YieldingSink, stop func(), err error) {
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, nil, err
	}
	api := &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}
	source := corev1.EventSource{Component: "vk-sandbox", Host: cfg.NodeName}
	yield := cfg.EventYield
	if cfg.EventQPS == 0 {
		yield = 0 // no budget bounds the Events that would wait
	}
	sink = vkcompat.NewYieldingSink(api, yield, clock.RealClock{}, m)
	normal, other := record.NewBroadcaster(), record.NewBroadcaster()
	normal.StartRecordingToSink(sink)
	other.StartRecordingToSink(api)
	var n record.EventRecorder = normal.NewRecorder(scheme.Scheme, source)
	if cfg.EventQPS > 0 {
		n = vkcompat.Budgeted(n, rate.NewLimiter(rate.Limit(cfg.EventQPS), cfg.EventBurst), shedReporter(m, log))
	}
	r = vkcompat.ByType(n, other.NewRecorder(scheme.Scheme, source))
	if !cfg.NormalEvents {
		r = kube.WarningsOnly(r)
	}
	return r, sink, func() { sink.Stop(); normal.Shutdown(); other.Shutdown() }, nil
}

// shedReporter counts each shed Event and logs at most one line a minute,
// with the count so far, so a burst is visible without a line per Pod.
func shedReporter(m *telemetry.Metrics, log *slog.Logger) func(reason string) {
	var shed atomic.Int64
	every := &rate.Sometimes{First: 1, Interval: time.Minute}
	return func(reason string) {
		m.EventShed(reason)
		n := shed.Add(1)
		every.Do(func() {
			log.Warn("Normal Events beyond the Event budget (--event-qps, --event-burst) are shed; the Pods' status carries the same facts",
				"reason", reason, "shed_since_start", n, "metric", "vksandbox_events_shed_total")
		})
	}
}
