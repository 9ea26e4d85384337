package vkcompat

// The Pod cache's generation stamp (docs/virtual-kubelet.md, 1).
//
// Behaviour: when a Pod's delete and its same-name replacement's create
// reach virtual-kubelet's worker as one sync, it never calls DeletePod for
// the old Pod, and it calls UpdatePod only if the provider's copy differs
// from the new Pod in spec, labels or annotations: UIDs are not compared.
// Pinned by: TestThePodCacheHoldsNoManagedFieldsAndStampsTheOwnUID, and end
// to end TestReplacementSyncedTogetherWithTheDeleteItReplacesRuns and
// TestReplacementCopiedWithTheOldPodsStampRuns.

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// PodCacheTransform is the transform of the Pod informer virtual-kubelet
// watches through. It may change the Pod in place: the informer owns each
// object it decodes.
//
//   - managedFields are dropped: nothing on the node reads them, and they
//     would travel in every copy and every status write (the apiserver
//     keeps them from the stored Pod).
//   - The annotation uidAnnotation is set to the Pod's own UID, whatever
//     the apiserver holds, and the Pod's first status write carries it
//     back. The stamp makes two generations of a name differ in their
//     annotations, so virtual-kubelet hands a replacement identical to the
//     old Pod to UpdatePod instead of leaving it Pending with no status;
//     that holds even when the replacement was made from a copy of the old
//     Pod (kubectl get -o yaml, then create) and carried the old
//     generation's stamp.
func PodCacheTransform(uidAnnotation string) cache.TransformFunc {
	return func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			p.ManagedFields = nil
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[uidAnnotation] = string(p.UID)
		}
		return obj, nil
	}
}
