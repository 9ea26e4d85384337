package telemetry

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vktrace "github.com/virtual-kubelet/virtual-kubelet/trace"
)

// BenchmarkVirtualKubeletQueueItem is what the telemetry adapters cost
// virtual-kubelet for one queue item, as its queue and its status handler
// use them on every Pod's create and status write: a span with four
// fields, two more fields, a child span with one, and a Debug line that
// the Info level drops, with the production default (no exporter). The
// field map is virtual-kubelet's own allocation and is counted here too.
func BenchmarkVirtualKubeletQueueItem(b *testing.B) {
	isolateEnv(b)
	setup(b, Config{})
	prev := vklog.L
	b.Cleanup(func() { vklog.L = prev })
	InstallVirtualKubeletLogger(NewLogger(io.Discard, slog.LevelInfo, true))
	added := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		ctx, span := vktrace.StartSpan(context.Background(), "handleQueueItemObject")
		ctx = span.WithFields(ctx, map[string]any{
			"requeues": 0, "originallyAdded": added, "addedViaRedirty": false, "plannedForWork": added,
		})
		ctx = span.WithField(ctx, "key", "ns/sandbox-1")
		ctx, child := vktrace.StartSpan(ctx, "syncPodStatusFromProvider")
		ctx = child.WithField(ctx, "pod", "sandbox-1")
		vklog.G(ctx).WithField("phase", "Running").Debug("updating pod status")
		child.End()
		span.End()
	}
}

// BenchmarkVirtualKubeletQueueMetrics is the metrics cost of one item
// through one of virtual-kubelet's queues: added, then done.
func BenchmarkVirtualKubeletQueueMetrics(b *testing.B) {
	isolateEnv(b)
	m := setup(b, Config{}).Metrics
	b.ReportAllocs()
	q := m.VKQueue("pod-status")
	for b.Loop() {
		q.Add(false)
		q.Done(time.Millisecond)
	}
}
