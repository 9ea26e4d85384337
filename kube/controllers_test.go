package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
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
	if _, ok := cfg.PodClient.(undecodedStatusPods); !ok {
		t.Fatalf("the pod controller writes through %T, want undecodedStatusPods", cfg.PodClient)
	}
}

// The Pod cache, and so every copy the pod controller and the provider make
// and every status write, carries no managedFields; and each Pod's
// generation stamp is its own UID, even when its manifest copied another's.
func TestThePodCacheHoldsNoManagedFieldsAndStampsTheOwnUID(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1",
		Annotations: map[string]string{AnnPodUID: "u0-of-the-replaced-pod", AnnTemplate: "t"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "creator", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}},
		Spec: corev1.PodSpec{NodeName: "n"}}
	f := NodePods(fake.NewClientset(pod), "n")
	lister := f.Core().V1().Pods().Lister()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	got, err := lister.Pods("ns").Get("p")
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != "u1" || got.Spec.NodeName != "n" {
		t.Fatalf("cached Pod %s/%s uid %s node %q: not the Pod created", got.Namespace, got.Name, got.UID, got.Spec.NodeName)
	}
	if got.ManagedFields != nil {
		t.Errorf("cached Pod keeps its managedFields: %+v", got.ManagedFields)
	}
	if got.Annotations[AnnPodUID] != "u1" || got.Annotations[AnnTemplate] != "t" {
		t.Errorf("cached Pod's annotations %v: want its own UID as %s, the rest kept", got.Annotations, AnnPodUID)
	}
}
