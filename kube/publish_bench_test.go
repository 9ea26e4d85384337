package kube

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// nopEngine queues nothing: the benchmark measures the provider alone.
type nopEngine struct{ Engine }

func (nopEngine) Create(context.Context, pipeline.Intent) error { return nil }

// BenchmarkPublishRunning is the provider's own work per Pod on its way to
// Running: CreatePod (the Pending entry and the intent) and Running (the
// claimed status, pushed), without Events. The push callback holds what
// it is given, as virtual-kubelet's status queue does.
func BenchmarkPublishRunning(b *testing.B) {
	p := NewProvider(nil, nil, slog.New(slog.DiscardHandler))
	p.SetEngine(nopEngine{})
	var pushed *corev1.Pod
	p.NotifyPods(context.Background(), func(pod *corev1.Pod) { pushed = pod })
	src := benchPod()
	src.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort}
	c := pipeline.ClaimView{ID: "sb_6729611cf7cee115", Address: "10.77.0.1:8080", ClaimedAt: time.Now(), Deadline: time.Now().Add(time.Hour)}
	ref := refOf(src)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.CreatePod(context.Background(), src.DeepCopy()); err != nil {
			b.Fatal(err)
		}
		p.Running(context.Background(), ref, c, false)
	}
	if pushed == nil || pushed.Status.Phase != corev1.PodRunning {
		b.Fatal("Running was not pushed")
	}
}
