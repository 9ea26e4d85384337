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

	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/kube/vkcompat"
	"github.com/cocoonstack/vk-sandbox/telemetry"
)

// eventRecorder builds the node's Event recorder: client-go's broadcaster
// on a client of its own (so a burst of Events never delays a status
// push), behind the Event budget (--event-qps, --event-burst) and, with
// --normal-events=false, a filter that keeps only Warnings. stop ends the
// broadcaster.
func eventRecorder(cfg *config, rc *rest.Config, m *telemetry.Metrics, log *slog.Logger) (r record.EventRecorder, stop func(), err error) {
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	eb := record.NewBroadcaster()
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	r = eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "vk-sandbox", Host: cfg.NodeName})
	if cfg.EventQPS > 0 {
		r = vkcompat.Budgeted(r, rate.NewLimiter(rate.Limit(cfg.EventQPS), cfg.EventBurst), shedReporter(m, log))
	}
	if !cfg.NormalEvents {
		r = kube.WarningsOnly(r)
	}
	return r, eb.Shutdown, nil
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
