package vkcompat

// The node's Pod watch, resumed when the apiserver ends it at once
// (docs/virtual-kubelet.md, 19).
//
// Behaviour (client-go v0.37.2, tools/cache/reflector.go): a watch that
// ends within a second without delivering anything is a
// VeryShortWatchError; the reflector then gives up the watch, waits out
// its backoff (0.8 s at first, with as much jitter again) and lists anew.
// A busy apiserver ends a node's watch whenever its buffer (ten events for
// a watch by spec.nodeName) stays full: in a burst of a thousand Pods on
// two cores it did so seven to fifteen times, and where the watch opened
// after such a cut was cut again before its first event, nothing reached
// the node for 1.5 s and the last Pod ran a second later.
// Pinned by: TestAShortWatchIsResumedFromTheSameVersion,
// TestAWatchThatDeliveredIsHandedBackWhenItEnds,
// TestShortWatchesAreResumedAFewTimesOnly.

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/utils/ptr"
)

const (
	// shortWatch is how long a watch must last, or deliver, not to be
	// resumed: client-go's bound for a very short watch.
	shortWatch = time.Second
	// maxResumes bounds the watches opened in a row for one that keeps
	// ending at once; then the reflector decides, as before.
	maxResumes = 3
	// firstResumePause is the pause before the first resume; it doubles.
	firstResumePause = 50 * time.Millisecond
)

// ResumeShortWatches is lw, except that a watch the apiserver ends within
// a second of opening, having delivered nothing, is opened again with the
// same options (the same resourceVersion) after a short pause, up to
// maxResumes times, and the reflector sees one watch. A watch that
// delivered an event, or lasted, ends as it did; so does a watch-list
// stream (sendInitialEvents) and anything the caller stops. obs hears of
// every end the apiserver made, resumed or handed back.
func ResumeShortWatches(lw ListerWatcher, obs WatchObserver) ListerWatcher {
	return resumingLW{lw, obs}
}

// WatchObserver counts the ends of the node's Pod watches that the
// apiserver made: resumed here, or handed back to the reflector (which
// re-watches, or relists after a backoff when the watch was short).
// telemetry.Metrics satisfies it.
type WatchObserver interface {
	PodWatchEnded(resumed bool)
}

// ListerWatcher is client-go's lister-watcher with and without contexts,
// as an informer takes it (cache.ToListWatcherWithWatchListSemantics
// makes one).
type ListerWatcher interface {
	cache.ListerWatcher
	cache.ListerWatcherWithContext
}

type resumingLW struct {
	ListerWatcher
	obs WatchObserver
}

// Watch is WatchWithContext without a context, for callers that use the
// deprecated method.
func (l resumingLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported passes on what lw says of watch-list
// streams, which the reflector asks before it uses them.
func (l resumingLW) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.ListerWatcher)
}

func (l resumingLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.ListerWatcher.WatchWithContext(ctx, opts)
	if err != nil || ptr.Deref(opts.SendInitialEvents, false) {
		return w, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &resumingWatch{out: make(chan watch.Event), cancel: cancel, done: make(chan struct{})}
	go r.run(ctx, w, func() (watch.Interface, error) { return l.ListerWatcher.WatchWithContext(ctx, opts) }, l.obs)
	return r, nil
}

// resumingWatch passes on the events of one watch after another.
type resumingWatch struct {
	out    chan watch.Event
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned
}

func (r *resumingWatch) ResultChan() <-chan watch.Event { return r.out }

// Stop ends the watch: the one open is stopped and ResultChan closed.
func (r *resumingWatch) Stop() {
	r.cancel()
	<-r.done
}

func (r *resumingWatch) run(ctx context.Context, w watch.Interface, open func() (watch.Interface, error), obs WatchObserver) {
	defer close(r.done)
	defer close(r.out)
	pause := firstResumePause
	for resumes := 0; ; resumes++ {
		start, delivered := time.Now(), r.pass(ctx, w)
		w.Stop()
		if ctx.Err() != nil {
			return // the caller stopped it: not the apiserver's end
		}
		// Invariant: only a watch that delivered nothing and ended within
		// shortWatch is resumed, and only maxResumes times in a row: every
		// other end reaches the reflector as the apiserver's.
		if delivered || time.Since(start) >= shortWatch || resumes == maxResumes {
			obs.PodWatchEnded(false)
			return
		}
		obs.PodWatchEnded(true)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause *= 2
		var err error
		if w, err = open(); err != nil {
			return // the reflector's next watch meets the error itself
		}
	}
}

// pass forwards w's events until it ends or ctx does, and reports whether
// it forwarded any.
func (r *resumingWatch) pass(ctx context.Context, w watch.Interface) (delivered bool) {
	for {
		select {
		case <-ctx.Done():
			return delivered
		case ev, ok := <-w.ResultChan():
			if !ok {
				return delivered
			}
			select {
			case r.out <- ev:
				delivered = true
			case <-ctx.Done():
				return delivered
			}
		}
	}
}
