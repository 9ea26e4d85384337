package vkcompat

// The order of two generations of one Pod name (docs/virtual-kubelet.md,
// 2).
//
// Behaviour: once the generation stamp (podcache.go) makes two generations
// differ, virtual-kubelet hands a same-name replacement to the provider as
// UpdatePod while the provider still holds the old generation, and
// DeletePod never comes for the old one.
// Pinned by (end to end): TestReplacementArrivingAsAnUpdateInTheSameSecondIsCreated,
// TestAReplacementStampedByASkewedClockIsCreated,
// TestStaleUIDUpdateAndDeleteAreIgnored; and TestNewerGenerationOrdersByResourceVersionThenByCreation.

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// NewerGeneration reports whether pod, another generation of the name than
// cur (another UID), was created after it. The caller first rules out a
// generation it knows was deleted: that one is stale whatever this says.
//
// The resource versions order the two: a same-name Pod is created only
// after the old one left storage, so every version of the replacement is
// above every version of the Pod it replaces, whatever the apiservers'
// clocks say. Without comparable versions (objects not read from an
// apiserver) the creation timestamps decide; they have a one-second grain,
// so a generation of the same second counts as the replacement:
// virtual-kubelet reads its Pods from an informer that only moves forward,
// and taking a replacement for a stale update would leave it Pending
// forever.
func NewerGeneration(pod, cur *corev1.Pod) bool {
	if c, err := resourceversion.CompareResourceVersion(pod.ResourceVersion, cur.ResourceVersion); err == nil {
		return c > 0
	}
	return !pod.CreationTimestamp.Before(&cur.CreationTimestamp)
}
