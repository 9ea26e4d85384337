package kube

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// TestStatusChangesLeaveEarlierPodObjectsUnchanged: the cache's entries
// share their unchanged parts (revise), so a status change must never
// write into an object already handed out: the Pod given to CreatePod, or
// the Pending one GetPod returned, which virtual-kubelet may still read.
func TestStatusChangesLeaveEarlierPodObjectsUnchanged(t *testing.T) {
	p := providerOver(t, nopEngine{}, ProviderOptions{Log: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	in := createPending(t, p)
	pending, err := p.GetPod(ctx, in.Namespace, in.Name)
	if err != nil {
		t.Fatal(err)
	}
	c := pipeline.ClaimView{ID: "sb_1", Address: "10.77.0.9:8080", ClaimedAt: time.Now(), Deadline: time.Now().Add(time.Hour)}
	p.Running(ctx, refOf(in), c, false)
	p.Renewed(ctx, refOf(in), pipeline.ClaimView{ID: "sb_1", Deadline: time.Now().Add(2 * time.Hour)})

	running, _ := p.GetPod(ctx, in.Namespace, in.Name)
	if running.Status.Phase != corev1.PodRunning || running.Annotations[AnnClaimID] != "sb_1" || running.Annotations[AnnDeadline] == "" {
		t.Fatalf("the entry after Running and Renewed: phase %s, annotations %v", running.Status.Phase, running.Annotations)
	}
	for name, pod := range map[string]*corev1.Pod{"the Pod given to CreatePod": in, "the Pending entry": pending} {
		if _, ok := pod.Annotations[AnnClaimID]; ok {
			t.Errorf("%s gained the claim annotation: %v", name, pod.Annotations)
		}
		if _, ok := pod.Annotations[AnnDeadline]; ok {
			t.Errorf("%s gained the deadline annotation: %v", name, pod.Annotations)
		}
	}
	if pending.Status.Phase != corev1.PodPending {
		t.Errorf("the Pending entry was changed to %s", pending.Status.Phase)
	}
}

// createPending hands p a new sandbox Pod, Pending and not claimed yet,
// and returns it.
func createPending(t *testing.T, p *Provider) *corev1.Pod {
	t.Helper()
	in := testkit.RunningSandboxPod()
	delete(in.Annotations, AnnClaimID)
	in.Status = corev1.PodStatus{Phase: corev1.PodPending}
	if err := p.CreatePod(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	return in
}

// nopEngine queues nothing: the benchmark measures the provider alone.
type nopEngine struct{ claimEngine }

func (nopEngine) Create(context.Context, pipeline.Intent) error { return nil }

// BenchmarkPublishRunning is the provider's own work per Pod on its way to
// Running: CreatePod (the Pending entry and the intent) and Running (the
// claimed status, pushed), without Events. The push callback holds what
// it is given, as virtual-kubelet's status queue does.
func BenchmarkPublishRunning(b *testing.B) {
	p := providerOver(b, nopEngine{}, ProviderOptions{Log: slog.New(slog.DiscardHandler)})
	var pushed *corev1.Pod
	p.NotifyPods(context.Background(), func(pod *corev1.Pod) { pushed = pod })
	src := testkit.RunningSandboxPod()
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

// TestThePushCarriesMetadataAndStatusNotTheSpec: virtual-kubelet is handed
// what it writes (the status, and the annotations a status write may
// change), not the spec, which it would compare, copy and send for
// nothing; the cache entry keeps the whole Pod for GetPod.
func TestThePushCarriesMetadataAndStatusNotTheSpec(t *testing.T) {
	p := providerOver(t, nopEngine{}, ProviderOptions{Log: slog.New(slog.DiscardHandler)})
	var pushed *corev1.Pod
	p.NotifyPods(context.Background(), func(pod *corev1.Pod) { pushed = pod })
	ctx := context.Background()
	in := createPending(t, p)
	c := pipeline.ClaimView{ID: "sb_1", Address: "10.77.0.9:8080", ClaimedAt: time.Now(), Deadline: time.Now().Add(time.Hour)}
	p.Running(ctx, refOf(in), c, false)
	if pushed == nil {
		t.Fatal("Running pushed nothing")
	}
	if pushed.Status.Phase != corev1.PodRunning || pushed.Status.PodIP != "10.77.0.9" || pushed.Annotations[AnnClaimID] != "sb_1" ||
		pushed.UID != in.UID || pushed.Name != in.Name || pushed.Namespace != in.Namespace || pushed.ResourceVersion != in.ResourceVersion {
		t.Fatalf("the pushed Pod lacks what a status write needs: %+v", pushed)
	}
	if len(pushed.Spec.Containers) != 0 || pushed.Spec.NodeName != "" {
		t.Errorf("the pushed Pod carries the spec: %+v", pushed.Spec)
	}
	entry, err := p.GetPod(ctx, in.Namespace, in.Name)
	if err != nil || len(entry.Spec.Containers) != 1 || entry.Status.Phase != corev1.PodRunning {
		t.Fatalf("the cache entry lost its spec or status: %+v, %v", entry, err)
	}
}
