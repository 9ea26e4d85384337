package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// The status queue retries a Pod's write past virtual-kubelet's default of
// 20 tries: a claim's Running status is pushed once, so giving up would
// leave the Pod Pending after a long apiserver outage.
func TestPodStatusWritesAreRetriedPastVirtualKubeletsLimit(t *testing.T) {
	client := fake.NewClientset()
	cfg, err := podControllerConfig(controllerConfig{client: client, spec: newNodeSpec("n")}, informers.NewSharedInformerFactory(client, 0))
	if err != nil {
		t.Fatal(err)
	}
	retry := cfg.SyncPodStatusFromProviderShouldRetryFunc
	if retry == nil {
		t.Fatal("the status queue has virtual-kubelet's default retry policy, which gives up after 20 tries")
	}
	for _, tries := range []int{1, 20, 21, 10_000} {
		if _, err := retry(context.Background(), "ns/p", tries, time.Now().Add(-time.Hour), errors.New("apiserver unreachable")); err != nil {
			t.Fatalf("try %d: the status write is given up: %v", tries, err)
		}
	}
}
