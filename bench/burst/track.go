package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/kube"
)

// podRec is what one run learns about one Pod. Zero times were not seen.
type podRec struct {
	Name        string
	CreateStart time.Time   // client: Create call issued
	CreateAck   time.Time   // client: Create call returned
	Created     metav1.Time // server: creationTimestamp (1 s resolution)
	Seen        time.Time   // client: first watch event for the Pod received
	Claimed     time.Time   // emulator: claimed_at (1 ms resolution; provider modes)
	StatusAck   time.Time   // client: UpdateStatus to Running returned (bare only)
	Running     time.Time   // client: watch event with phase Running and a podIP received
}

// tracker follows one namespace by watch and records, per Pod, when it was
// first seen Running with a podIP. done closes when want Pods are Running.
type tracker struct {
	mu      sync.Mutex
	pods    map[string]*podRec
	running int
	want    int
	// claimAnn counts Pods whose Running object carries the claim-id
	// annotation (UpdateStatus also wrote metadata).
	claimAnn int
	done     chan struct{}
	acked    atomic.Int64 // creates acknowledged, for the progress timeline
	errs     atomic.Int64 // failed create or status calls
	lastErr  atomic.Pointer[string]
}

func newTracker(want int) *tracker {
	return &tracker{pods: make(map[string]*podRec, want), want: want, done: make(chan struct{})}
}

func (t *tracker) rec(name string) *podRec {
	r := t.pods[name]
	if r == nil {
		r = &podRec{Name: name}
		t.pods[name] = r
	}
	return r
}

func (t *tracker) createStarted(name string, at time.Time) {
	t.mu.Lock()
	t.rec(name).CreateStart = at
	t.mu.Unlock()
}

func (t *tracker) createAcked(name string, at time.Time) {
	t.mu.Lock()
	t.rec(name).CreateAck = at
	t.mu.Unlock()
	t.acked.Add(1)
}

func (t *tracker) statusAcked(name string, at time.Time) {
	t.mu.Lock()
	t.rec(name).StatusAck = at
	t.mu.Unlock()
}

func (t *tracker) fail(err error) {
	t.errs.Add(1)
	s := err.Error()
	t.lastErr.Store(&s)
}

func (t *tracker) observe(p *corev1.Pod, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.rec(p.Name)
	r.Created = p.CreationTimestamp
	if r.Seen.IsZero() {
		r.Seen = at
	}
	if r.Running.IsZero() && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
		r.Running = at
		t.running++
		if _, ok := p.Annotations[kube.AnnClaimID]; ok {
			t.claimAnn++
		}
		if t.running == t.want {
			close(t.done)
		}
	}
}

func (t *tracker) runningCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

func (t *tracker) snapshot() []podRec {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]podRec, 0, len(t.pods))
	for _, r := range t.pods {
		out = append(out, *r)
	}
	return out
}

// watchNamespace opens a watch on the namespace's Pods and returns once the
// apiserver has accepted it, so that no event of the run is received late
// because the stream was still being set up. A closed stream is reopened
// from the last resource version seen. The event receipt time is the
// observation time.
func watchNamespace(ctx context.Context, cs kubernetes.Interface, ns string, t *tracker) (stop func(), err error) {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	open := func(rv string) (watch.Interface, error) {
		timeout := int64(3600)
		return cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: &timeout, AllowWatchBookmarks: true})
	}
	w, err := open(l.ResourceVersion)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		rv := l.ResourceVersion
		for {
			for ev := range w.ResultChan() {
				at := time.Now()
				switch p, ok := ev.Object.(*corev1.Pod); {
				case ok && (ev.Type == watch.Added || ev.Type == watch.Modified):
					rv = p.ResourceVersion
					t.observe(p, at)
				case ok && ev.Type == watch.Bookmark:
					rv = p.ResourceVersion
				case ev.Type == watch.Error && ctx.Err() == nil:
					t.fail(fmt.Errorf("watch: %v", ev.Object))
				}
			}
			w.Stop()
			for ctx.Err() == nil {
				if w, err = open(rv); err == nil {
					break
				}
				t.fail(fmt.Errorf("rewatch: %w", err))
				time.Sleep(100 * time.Millisecond)
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return func() { cancel(); <-finished }, nil
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
	var (
		mu  sync.Mutex
		out []sample
	)
	done := make(chan struct{})
	take := func() {
		s := sample{T: time.Since(t0).Seconds(), Acked: t.acked.Load(), Running: t.runningCount()}
		if claims != nil {
			s.Claimed = claims()
		}
		mu.Lock()
		out = append(out, s)
		mu.Unlock()
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				take()
				return
			case <-tick.C:
				take()
			}
		}
	}()
	return func() []sample { <-done; mu.Lock(); defer mu.Unlock(); return out }
}
