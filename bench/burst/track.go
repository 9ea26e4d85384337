package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

// podRec is what one run learns about one Pod (podload.Rec).
type podRec = podload.Rec

// tracker follows one namespace (podload.Tracker). The unexported methods
// adapt it to modes.go's createAll and runBare, which take Pod names; they
// go once those call podload.CreateAll and podload.RunBare instead.
type tracker struct {
	*podload.Tracker
	ns string
}

func newTracker(want int, ns string) *tracker {
	return &tracker{Tracker: podload.NewTracker(want), ns: ns}
}

func (t *tracker) pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: name}}
}

func (t *tracker) createStarted(name string, at time.Time) { t.CreateStarted(t.pod(name), at) }
func (t *tracker) createAcked(name string, at time.Time)   { t.CreateAcked(t.pod(name), at) }
func (t *tracker) statusAcked(name string, at time.Time)   { t.StatusAcked(t.pod(name), at) }
func (t *tracker) fail(err error)                          { t.Fail(err) }

// watchNamespace follows the namespace's Pods into t (podload.Watch).
func watchNamespace(ctx context.Context, cs kubernetes.Interface, ns string, t *tracker) (stop func(), err error) {
	return podload.Watch(ctx, cs, ns, "", t.Tracker)
}

// sample is one point of a run's progress timeline.
type sample struct {
	T       float64 `json:"t_s"`
	Acked   int64   `json:"creates_acked"`
	Claimed int64   `json:"claims"`
	Running int     `json:"running"`
}

// sampleProgress records progress every 100 ms until ctx ends.
func sampleProgress(ctx context.Context, t0 time.Time, t *tracker, claims func() int64) func() []sample {
	return podload.Every(ctx, 100*time.Millisecond, func() sample {
		s := sample{T: time.Since(t0).Seconds(), Acked: t.Acked(), Running: t.Running()}
		if claims != nil {
			s.Claimed = claims()
		}
		return s
	})
}
