package vkcompat

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// The Pod cache, and so every copy the pod controller and the provider make
// and every status write, carries no managedFields; and each Pod's
// generation stamp is its own UID, even when its manifest copied another's.
func TestThePodCacheHoldsNoManagedFieldsAndStampsTheOwnUID(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1",
		Annotations: map[string]string{annPodUID: "u0-of-the-replaced-pod", annTemplate: "t"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "creator", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}},
		Spec: corev1.PodSpec{NodeName: "n"}}
	f := informers.NewSharedInformerFactoryWithOptions(fake.NewClientset(pod), 0, informers.WithTransform(PodCacheTransform(annPodUID)))
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
	if got.Annotations[annPodUID] != "u1" || got.Annotations[annTemplate] != "t" {
		t.Errorf("cached Pod's annotations %v: want its own UID as %s, the rest kept", got.Annotations, annPodUID)
	}
}
