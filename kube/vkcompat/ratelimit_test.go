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
	if err := ReplaceRateLimiters(nil, time.Second)(&c); err != nil {
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
