package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cocoonstack/vk-sandbox/kube/vkcompat"
)

// The status and final-delete queues retry past virtual-kubelet's default
// of 20 tries: a claim's Running status is pushed once, so giving up would
// leave the Pod Pending after a long apiserver outage (and a deleted Pod
// Terminating).
func TestPodStatusWritesAndDeletesAreRetriedPastVirtualKubeletsLimit(t *testing.T) {
	client := fake.NewClientset()
	cfg, err := podControllerConfig(controllerConfig{client: client, spec: newNodeSpec("n")}, informers.NewSharedInformerFactory(client, 0))
	if err != nil {
		t.Fatal(err)
	}
	for queue, retry := range map[string]node.ShouldRetryFunc{
		"status":       cfg.SyncPodStatusFromProviderShouldRetryFunc,
		"final delete": cfg.DeletePodsFromKubernetesShouldRetryFunc,
	} {
		if retry == nil {
			t.Fatalf("the %s queue has virtual-kubelet's default retry policy, which gives up after 20 tries", queue)
		}
		for _, tries := range []int{1, 20, 21, 10_000} {
			if _, err := retry(context.Background(), "ns/p", tries, time.Now().Add(-time.Hour), errors.New("apiserver unreachable")); err != nil {
				t.Fatalf("%s queue, try %d: given up: %v", queue, tries, err)
			}
		}
	}
}

// virtual-kubelet discards the Pod a status write answers with: the pod
// controller writes through the client that does not decode it.
func TestPodStatusWritesDoNotDecodeTheAnswer(t *testing.T) {
	client := fake.NewClientset()
	cfg, err := podControllerConfig(controllerConfig{client: client, spec: newNodeSpec("n")}, informers.NewSharedInformerFactory(client, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.PodClient.(vkcompat.UndecodedStatusPods); !ok {
		t.Fatalf("the pod controller writes through %T, want vkcompat.UndecodedStatusPods", cfg.PodClient)
	}
}
