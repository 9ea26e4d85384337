package vkcompat

import (
	"fmt"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"k8s.io/client-go/util/workqueue"
)

// A Pod's retries in virtual-kubelet's queues back off from 5 ms and never
// wait longer than the cap (--requeue-max).
func TestQueueRetriesBackOffUpToTheCap(t *testing.T) {
	l := newMeteredLimiter(queuePodStatus, nil, 100*time.Millisecond)
	var got []time.Duration
	for range 8 {
		got = append(got, l.When("ns/p"))
	}
	want := []time.Duration{5, 10, 20, 40, 80, 100, 100, 100}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
	l.Forget("ns/p")
	if d := l.When("ns/p"); d != 5*time.Millisecond {
		t.Fatalf("after Forget the first delay is %v, want 5ms", d)
	}
}

// The queues virtual-kubelet's pod controller is given hold no token
// bucket: a burst of distinct Pods, far past the default bucket's 100,
// passes every limiter at once. virtual-kubelet's default (10 qps, burst
// 100) would delay the 101st by about 100 ms and each one after by more.
func TestPodControllerQueuesHaveNoTokenBucket(t *testing.T) {
	var c node.PodControllerConfig
	override, _ := ReplaceRateLimiters(nil, time.Second)
	if err := override(&c); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]workqueue.TypedRateLimiter[any]{
		queueSyncPods: c.SyncPodsFromKubernetesRateLimiter, queueDeletePods: c.DeletePodsFromKubernetesRateLimiter,
		queuePodStatus: c.SyncPodStatusFromProviderRateLimiter,
	} {
		if l == nil {
			t.Fatalf("queue %s keeps virtual-kubelet's default limiter", name)
		}
		for i := range 1000 {
			if d := l.When(fmt.Sprintf("ns/p%d", i)); d != 5*time.Millisecond {
				t.Fatalf("queue %s: the first add of Pod %d waits %v, want the per-item first delay (5ms) for every Pod", name, i, d)
			}
		}
	}
}

// The node is waiting while a Pod is between When and Forget in the sync
// or the status queue; the delete queue's retries do not count.
func TestWaitingCoversTheSyncAndStatusQueuesOnly(t *testing.T) {
	var c node.PodControllerConfig
	override, waiting := ReplaceRateLimiters(nil, time.Second)
	if err := override(&c); err != nil {
		t.Fatal(err)
	}
	if waiting() {
		t.Fatal("waiting before any item was added")
	}
	c.DeletePodsFromKubernetesRateLimiter.When("ns/gone")
	if waiting() {
		t.Fatal("a delete retry counts as waiting")
	}
	for name, l := range map[string]workqueue.TypedRateLimiter[any]{
		queueSyncPods: c.SyncPodsFromKubernetesRateLimiter, queuePodStatus: c.SyncPodStatusFromProviderRateLimiter,
	} {
		l.When("ns/p")
		l.When("ns/p") // a retry of the same Pod
		if !waiting() {
			t.Fatalf("a Pod unfinished in %s is not waiting", name)
		}
		l.Forget("ns/p")
		if waiting() {
			t.Fatalf("a Pod finished in %s is still waiting", name)
		}
	}
}
