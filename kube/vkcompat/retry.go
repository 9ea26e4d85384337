package vkcompat

// The status and final-delete retry policy (docs/virtual-kubelet.md, 7).
//
// Behaviour: virtual-kubelet's queues give up on an item after 20 tries
// (about 4 minutes at a 30 s backoff cap) unless given a ShouldRetryFunc;
// the provider pushes a claim's Running status once.
// Pinned by (in kube, where the pod controller is configured):
// TestPodStatusWritesAndDeletesAreRetriedPastVirtualKubeletsLimit, and end
// to end TestStatusWriteAndFinalDeleteOutlastRefusals.

import (
	"context"
	"time"
)

// RetryWhileThePodExists is the ShouldRetryFunc of the pod controller's
// status and final-delete queues: it never gives up. It relies on those
// queues' handlers returning nil once the informer no longer shows the Pod,
// or shows another UID, so a Pod that is gone is not retried; the queue's
// per-item backoff spaces the tries up to the limiter's cap. An apiserver
// outage longer than virtual-kubelet's 20 tries would otherwise leave a
// claimed Pod Pending for good, its VM held, and a deleted Pod
// Terminating. A kubelet does not give up either.
func RetryWhileThePodExists(context.Context, string, int, time.Time, error) (*time.Duration, error) {
	return nil, nil // nil delay: the queue's per-item backoff decides when
}
