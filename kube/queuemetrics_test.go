package kube

import (
	"testing"
	"time"
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
