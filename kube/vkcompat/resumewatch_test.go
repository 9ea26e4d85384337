package vkcompat

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// scriptedLW hands out the watches of script in turn, each made when it
// is asked for, and records the options of every watch.
type scriptedLW struct {
	mu     sync.Mutex
	script []func() watch.Interface
	opts   []metav1.ListOptions
}

func (l *scriptedLW) List(metav1.ListOptions) (runtime.Object, error) { return &corev1.PodList{}, nil }
func (l *scriptedLW) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return &corev1.PodList{}, nil
}
func (l *scriptedLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), o)
}
func (l *scriptedLW) WatchWithContext(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opts = append(l.opts, o)
	next := l.script[min(len(l.opts), len(l.script))-1]
	return next(), nil
}

func (l *scriptedLW) watches() []metav1.ListOptions {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]metav1.ListOptions(nil), l.opts...)
}

// endedAtOnce is a watch the apiserver ends before its first event.
func endedAtOnce() watch.Interface {
	w := watch.NewFake()
	w.Stop()
	return w
}

// delivering is a watch that delivers pod, then ends.
func delivering(pod string) func() watch.Interface {
	return func() watch.Interface {
		w := watch.NewFake()
		go func() {
			w.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, ResourceVersion: "43"}})
			w.Stop()
		}()
		return w
	}
}

// watchEnds records each end PodWatchEnded reports: true for resumed.
type watchEnds struct {
	mu   sync.Mutex
	ends []bool
}

func (o *watchEnds) PodWatchEnded(resumed bool) {
	o.mu.Lock()
	o.ends = append(o.ends, resumed)
	o.mu.Unlock()
}

// seen is the ends reported once the watch's goroutine has returned (its
// ResultChan closed, as drain waits for).
func (o *watchEnds) seen() []bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]bool(nil), o.ends...)
}

// resumingFrom42 is lw's watch from resourceVersion 42, resumed, reporting
// its ends to obs; the test stops it when it ends.
func resumingFrom42(t *testing.T, lw *scriptedLW, obs WatchObserver) watch.Interface {
	t.Helper()
	w, err := ResumeShortWatches(lw, obs).WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "42"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// drain reads w to its end (or fails at the deadline) and returns the
// names of the Pods it delivered.
func drain(t *testing.T, w watch.Interface) []string {
	t.Helper()
	var got []string
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return got
			}
			got = append(got, ev.Object.(*corev1.Pod).Name)
		case <-deadline:
			t.Fatalf("the watch did not end; delivered %v", got)
		}
	}
}

// A watch the apiserver ends at once is opened again from the same
// resourceVersion, and the reflector sees one watch with the events of
// the second: not a very short watch, which it would answer with a
// backoff and a relist.
func TestAShortWatchIsResumedFromTheSameVersion(t *testing.T) {
	lw := &scriptedLW{script: []func() watch.Interface{endedAtOnce, delivering("p-1")}}
	obs := &watchEnds{}
	if got := drain(t, resumingFrom42(t, lw, obs)); len(got) != 1 || got[0] != "p-1" {
		t.Fatalf("delivered %v, want the second watch's p-1", got)
	}
	if ends := obs.seen(); !slices.Equal(ends, []bool{true, false}) {
		t.Errorf("ends reported (true: resumed) %v, want one resumed, then the second handed back", ends)
	}
	opts := lw.watches()
	if len(opts) != 2 || opts[0].ResourceVersion != "42" || opts[1].ResourceVersion != "42" {
		t.Fatalf("watches opened: %+v; want two, both from resourceVersion 42", opts)
	}
}

// A watch that delivered ends as the apiserver ended it (the reflector
// re-watches from the last event at once), and a watch-list stream is
// not wrapped at all.
func TestAWatchThatDeliveredIsHandedBackWhenItEnds(t *testing.T) {
	lw := &scriptedLW{script: []func() watch.Interface{delivering("p-1"), delivering("p-2")}}
	if got := drain(t, resumingFrom42(t, lw, &watchEnds{})); len(got) != 1 || got[0] != "p-1" {
		t.Fatalf("delivered %v, want p-1 and the end", got)
	}
	if n := len(lw.watches()); n != 1 {
		t.Fatalf("%d watches opened for one that delivered", n)
	}

	yes := true
	raw := endedAtOnce()
	lw = &scriptedLW{script: []func() watch.Interface{func() watch.Interface { return raw }}}
	if w, _ := ResumeShortWatches(lw, &watchEnds{}).WatchWithContext(context.Background(), metav1.ListOptions{SendInitialEvents: &yes}); w != raw {
		t.Fatal("a watch-list stream was wrapped")
	}
}

// A watch that keeps ending at once is opened maxResumes more times,
// then its end reaches the reflector, whose backoff decides; Stop ends a
// resumed watch.
func TestShortWatchesAreResumedAFewTimesOnly(t *testing.T) {
	lw := &scriptedLW{script: []func() watch.Interface{endedAtOnce}}
	obs := &watchEnds{}
	if got := drain(t, resumingFrom42(t, lw, obs)); len(got) != 0 {
		t.Fatalf("delivered %v", got)
	}
	if n := len(lw.watches()); n != maxResumes+1 {
		t.Fatalf("%d watches opened, want %d", n, maxResumes+1)
	}
	if ends := obs.seen(); !slices.Equal(ends, []bool{true, true, true, false}) {
		t.Errorf("ends reported (true: resumed) %v, want %d resumed, then the last handed back", ends, maxResumes)
	}

	silent := watch.NewFake() // open, and never delivers
	lw = &scriptedLW{script: []func() watch.Interface{func() watch.Interface { return silent }}}
	obs = &watchEnds{}
	w, err := ResumeShortWatches(lw, obs).WatchWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("Stop left the watch open")
	}
	if ends := obs.seen(); len(ends) != 0 {
		t.Errorf("a watch the caller stopped was reported as the apiserver's end: %v", ends)
	}
}
