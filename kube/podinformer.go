package kube

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// writtenBack are the annotations this provider writes on its own Pods, in
// the same status write that pushes the claim (or its renewal).
var writtenBack = []string{AnnClaimID, AnnDeadline, AnnPodUID}

// echoFilteredPods is the Pod informer handed to virtual-kubelet's pod
// controller. It drops the one update event that is only the echo of this
// provider's own write: a Pod whose written-back annotations changed and
// nothing else that virtual-kubelet acts on. Without it, every claim costs
// a second full sync of its Pod, whose deep comparisons (go-cmp over the
// whole object) are among the costliest work on the node, and which can
// only conclude that nothing changed: the provider's own copy already
// carries those annotations. It also hands an update
// that changes the Pod's UID over as a delete and a create (see OnUpdate).
type echoFilteredPods struct {
	corev1informers.PodInformer
}

func (i echoFilteredPods) Informer() cache.SharedIndexInformer {
	return echoFilteredInformer{i.PodInformer.Informer()}
}

type echoFilteredInformer struct {
	cache.SharedIndexInformer
}

func (i echoFilteredInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(echoFilter{h})
}

func (i echoFilteredInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(echoFilter{h}, resync)
}

func (i echoFilteredInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(echoFilter{h}, o)
}

type echoFilter struct {
	cache.ResourceEventHandler
}

// OnDelete hands virtual-kubelet every delete as the Pod it deletes. A
// delete the informer learned of only from a relist (the watch was down
// while the Pod went) arrives as a cache.DeletedFinalStateUnknown, which
// virtual-kubelet's pod controller drops without a word: its DeletePod
// would never run, the claim would stay held for a Pod that is gone, and a
// Pending Pod's intent would go on claiming. The tombstone carries the
// last Pod the informer knew, which is the one the provider holds.
func (f echoFilter) OnDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if pod, ok := d.Obj.(*corev1.Pod); ok {
			obj = pod
		}
	}
	f.ResourceEventHandler.OnDelete(obj)
}

func (f echoFilter) OnUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Pod)
	n, ok2 := newObj.(*corev1.Pod)
	if ok1 && ok2 && o.UID != n.UID {
		// A relist found the key held by a new generation: the old Pod's
		// delete and the new one's create happened while the watch was
		// down. virtual-kubelet compares an update's old and new Pods
		// without their UIDs, and drops one whose spec, labels and
		// annotations match (its sync would then never create the new
		// Pod). It is handed over as what it is: a delete, then a create.
		f.ResourceEventHandler.OnDelete(oldObj)
		f.ResourceEventHandler.OnAdd(newObj, false)
		return
	}
	if ok1 && ok2 && onlyWrittenBackChanged(o, n) {
		return
	}
	f.ResourceEventHandler.OnUpdate(oldObj, newObj)
}

// onlyWrittenBackChanged reports whether n differs from o in at least one
// written-back annotation and in nothing virtual-kubelet's pod controller
// reacts to: the same generation (UID), labels, other annotations,
// deletion and the spec fields a Pod update may change. The status is not
// compared: that write is the provider's own push, which virtual-kubelet
// already holds. A change by anyone else to any of those fields, an
// informer resync (nothing changed) and a delete all pass through.
func onlyWrittenBackChanged(o, n *corev1.Pod) bool {
	if o.UID != n.UID || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
		!ptr.Equal(o.DeletionGracePeriodSeconds, n.DeletionGracePeriodSeconds) ||
		!maps.Equal(o.Labels, n.Labels) {
		return false
	}
	if !writtenBackChanged(o.Annotations, n.Annotations) || !otherAnnotationsEqual(o.Annotations, n.Annotations) {
		return false
	}
	os, ns := &o.Spec, &n.Spec
	return equality.Semantic.DeepEqual(os.Containers, ns.Containers) &&
		equality.Semantic.DeepEqual(os.InitContainers, ns.InitContainers) &&
		equality.Semantic.DeepEqual(os.EphemeralContainers, ns.EphemeralContainers) &&
		ptr.Equal(os.ActiveDeadlineSeconds, ns.ActiveDeadlineSeconds) &&
		equality.Semantic.DeepEqual(os.Tolerations, ns.Tolerations)
}

// writtenBackChanged reports whether any written-back annotation differs.
func writtenBackChanged(o, n map[string]string) bool {
	for _, a := range writtenBack {
		ov, ook := o[a]
		nv, nok := n[a]
		if ov != nv || ook != nok {
			return true
		}
	}
	return false
}

// otherAnnotationsEqual compares the annotations other than the written-back
// ones, without copying either map: this runs for every Pod update event.
func otherAnnotationsEqual(o, n map[string]string) bool {
	if others(o) != others(n) {
		return false
	}
	for k, v := range o {
		if slices.Contains(writtenBack, k) {
			continue
		}
		if nv, ok := n[k]; !ok || nv != v {
			return false
		}
	}
	return true
}

// others counts the annotations that are not written back.
func others(m map[string]string) int {
	c := len(m)
	for _, a := range writtenBack {
		if _, ok := m[a]; ok {
			c--
		}
	}
	return c
}
