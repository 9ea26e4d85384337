package podload

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Watch opens a watch on the Pods of namespace ns ("" for every
// namespace) that match sel's label and field selectors (empty: all) and
// feeds t. It returns once
// the apiserver has accepted the watch, so that no event of the run is
// received late because the stream was still being set up. A closed
// stream is reopened from the last resource version seen. The event
// receipt time is the observation time.
func Watch(ctx context.Context, cs kubernetes.Interface, ns string, sel metav1.ListOptions, t *Tracker) (stop func(), err error) {
	first := sel
	first.Limit = 1
	l, err := cs.CoreV1().Pods(ns).List(ctx, first)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	open := func(rv string) (watch.Interface, error) {
		timeout := int64(3600)
		o := sel
		o.ResourceVersion, o.TimeoutSeconds, o.AllowWatchBookmarks = rv, &timeout, true
		return cs.CoreV1().Pods(ns).Watch(ctx, o)
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
					t.Observe(p, at)
				case ok && ev.Type == watch.Bookmark:
					rv = p.ResourceVersion
				case ev.Type == watch.Error && ctx.Err() == nil:
					t.Fail(fmt.Errorf("watch: %v", ev.Object))
				}
			}
			w.Stop()
			if ctx.Err() == nil {
				t.rewatch.Add(1)
			}
			// Reopen from the last version seen, every 100ms until it opens or
			// the run ends; each failure is recorded.
			w, err = backoff.RetryNotifyWithData(func() (watch.Interface, error) { return open(rv) },
				backoff.WithContext(backoff.NewConstantBackOff(100*time.Millisecond), ctx),
				func(err error, _ time.Duration) { t.Fail(fmt.Errorf("rewatch: %w", err)) })
			if err != nil || ctx.Err() != nil {
				return
			}
		}
	}()
	return func() { cancel(); <-finished }, nil
}
