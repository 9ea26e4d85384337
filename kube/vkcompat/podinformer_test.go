package vkcompat

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func echoTestPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", ResourceVersion: "1",
			Labels:      map[string]string{"app": "x"},
			Annotations: map[string]string{annTemplate: "default"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1"}}},
	}
}

// Only the echo of the provider's own claim write is dropped; every change
// virtual-kubelet acts on, and a resync, still reaches it.
func TestOnlyTheEchoOfTheProvidersOwnWriteIsDropped(t *testing.T) {
	claimed := func(p *corev1.Pod) {
		p.ResourceVersion = "2"
		p.Annotations[annClaimID] = "sb_1"
		p.Annotations[annDeadline] = "2026-12-05T00:00:00Z"
		p.Annotations[annPodUID] = string(p.UID)
		p.Status.Phase = corev1.PodRunning
	}
	now := metav1.Now()
	cases := []struct {
		name    string
		change  func(p *corev1.Pod)
		dropped bool
	}{
		{"claim written back", claimed, true},
		{"a Pending status written back", func(p *corev1.Pod) {
			p.ResourceVersion = "2"
			p.Annotations[annPodUID] = string(p.UID)
			p.Status.Reason = "SandboxCapacityMiss"
		}, true},
		{"lease renewed", func(p *corev1.Pod) { claimed(p); p.Annotations[annDeadline] = "2026-12-06T00:00:00Z" }, true},
		{"resync, nothing changed", func(p *corev1.Pod) {}, false},
		{"status only, by anyone", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, false},
		{"another annotation too", func(p *corev1.Pod) { claimed(p); p.Annotations["x"] = "y" }, false},
		{"a label too", func(p *corev1.Pod) { claimed(p); p.Labels["app"] = "z" }, false},
		{"deleted too", func(p *corev1.Pod) { claimed(p); p.DeletionTimestamp = &now }, false},
		{"image too", func(p *corev1.Pod) { claimed(p); p.Spec.Containers[0].Image = "img:2" }, false},
		{"toleration too", func(p *corev1.Pod) { claimed(p); p.Spec.Tolerations = []corev1.Toleration{{Key: "k"}} }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := echoTestPod()
			nw := old.DeepCopy()
			c.change(nw)
			var got int
			h := echoFilter{cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) { got++ }}, writtenBack}
			h.OnUpdate(old, nw)
			if dropped := got == 0; dropped != c.dropped {
				t.Fatalf("dropped=%v, want %v", dropped, c.dropped)
			}
		})
	}
}

// An update whose new Pod is another generation of the key (a relist after
// the old Pod was deleted and a same-name one created) reaches
// virtual-kubelet as a delete of the old Pod, then an add of the new one:
// as an update whose spec, labels and annotations match, virtual-kubelet
// would drop it and never create the new generation.
func TestAnUpdateToAnotherGenerationIsADeleteThenAnAdd(t *testing.T) {
	old := echoTestPod()
	nw := old.DeepCopy()
	nw.UID, nw.ResourceVersion = "u2", "5"
	var got []string
	h := echoFilter{cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { got = append(got, "add "+string(obj.(*corev1.Pod).UID)) },
		UpdateFunc: func(_, _ any) { got = append(got, "update") },
		DeleteFunc: func(obj any) { got = append(got, "delete "+string(obj.(*corev1.Pod).UID)) },
	}, writtenBack}
	h.OnUpdate(old, nw)
	if want := []string{"delete u1", "add u2"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// A delete the informer learned of from a relist arrives wrapped in a
// cache.DeletedFinalStateUnknown. virtual-kubelet's pod controller drops
// anything that is not a *corev1.Pod, so the node unwraps it: the delete
// reaches DeletePod with the last Pod the informer knew.
func TestADeleteLearnedFromARelistReachesVirtualKubeletAsThePod(t *testing.T) {
	pod := echoTestPod()
	var got []any
	h := echoFilter{cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) { got = append(got, obj) }}, writtenBack}
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: pod.Namespace + "/" + pod.Name, Obj: pod})
	h.OnDelete(pod)
	if len(got) != 2 {
		t.Fatalf("%d deletes handed on, want 2", len(got))
	}
	for i, obj := range got {
		if p, ok := obj.(*corev1.Pod); !ok || p.UID != pod.UID {
			t.Fatalf("delete %d handed on as %T, want the *corev1.Pod %s", i, obj, pod.UID)
		}
	}
}
