package vkcompat

// The Pod informer handed to virtual-kubelet's pod controller
// (docs/virtual-kubelet.md, 3, 4 and 5). Its handler drops the echo of the
// provider's own write (echo.go), hands an update to another UID over as a
// delete and an add, and unwraps a delete learned from a relist.
//
// Behaviour: the pod controller's UpdateFunc compares an update's Pods
// without their UIDs, and its DeleteFunc drops anything that is not a
// *corev1.Pod.
// Pinned by: TestOnlyTheEchoOfTheProvidersOwnWriteIsDropped,
// TestAnUpdateToAnotherGenerationIsADeleteThenAnAdd,
// TestADeleteLearnedFromARelistReachesVirtualKubeletAsThePod, and end to
// end TestReplacementSeenOnlyByARelistRuns and
// TestADeleteSeenOnlyByARelistReleases.

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// EchoFilteredPods is pods as handed to virtual-kubelet's pod controller.
// writtenBack names the annotations the provider writes on its own Pods,
// in the same status write that pushes the claim (or its renewal).
//
// It drops the one update event that is only the echo of that write: a
// Pod whose written-back annotations changed and nothing else that
// virtual-kubelet acts on. Without it, every claim costs a second full
// sync of its Pod, whose deep comparisons (go-cmp over the whole object)
// are among the costliest work on the node, and which can only conclude
// that nothing changed: the provider's own copy already carries those
// annotations. It also hands an update that changes the Pod's UID over as
// a delete and a create (see OnUpdate).
func EchoFilteredPods(pods corev1informers.PodInformer, writtenBack []string) corev1informers.PodInformer {
	return echoFilteredPods{pods, writtenBack}
}

type echoFilteredPods struct {
	corev1informers.PodInformer
	writtenBack []string
}

func (i echoFilteredPods) Informer() cache.SharedIndexInformer {
	return echoFilteredInformer{i.PodInformer.Informer(), i.writtenBack}
}

type echoFilteredInformer struct {
	cache.SharedIndexInformer
	writtenBack []string
}

func (i echoFilteredInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(echoFilter{h, i.writtenBack})
}

func (i echoFilteredInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(echoFilter{h, i.writtenBack}, resync)
}

func (i echoFilteredInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(echoFilter{h, i.writtenBack}, o)
}

type echoFilter struct {
	cache.ResourceEventHandler
	writtenBack []string
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
	if ok1 && ok2 && onlyWrittenBackChanged(o, n, f.writtenBack) {
		return
	}
	f.ResourceEventHandler.OnUpdate(oldObj, newObj)
}
