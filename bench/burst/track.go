package main

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

// podRec is what one run learns about one Pod (podload.Rec).
type podRec = podload.Rec

// tracker follows one namespace's Pods.
type tracker = podload.Tracker

// watchNamespace follows the namespace's Pods into t (podload.Watch).
func watchNamespace(ctx context.Context, cs kubernetes.Interface, ns string, t *tracker) (stop func(), err error) {
	return podload.Watch(ctx, cs, ns, metav1.ListOptions{}, t)
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
