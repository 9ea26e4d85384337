package vkcompat

// The echo test of the Pod informer's handler (docs/virtual-kubelet.md, 3).
//
// Behaviour: the pod controller enqueues a full sync of a Pod whenever its
// annotations change, the echo of the provider's own status write
// included; the sync compares the whole Pod only to find nothing to do.
// Pinned by: TestOnlyTheEchoOfTheProvidersOwnWriteIsDropped.

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// onlyWrittenBackChanged reports whether n differs from o in at least one
// written-back annotation and in nothing virtual-kubelet's pod controller
// reacts to: the same generation (UID), labels, other annotations,
// deletion and the spec fields a Pod update may change (those its
// podsEqual compares). The status is not compared: that write is the
// provider's own push, which virtual-kubelet already holds. A change by
// anyone else to any of those fields, an informer resync (nothing changed)
// and a delete all pass through.
func onlyWrittenBackChanged(o, n *corev1.Pod, writtenBack []string) bool {
	if o.UID != n.UID || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
		!ptr.Equal(o.DeletionGracePeriodSeconds, n.DeletionGracePeriodSeconds) ||
		!maps.Equal(o.Labels, n.Labels) {
		return false
	}
	if !writtenBackChanged(o.Annotations, n.Annotations, writtenBack) ||
		!otherAnnotationsEqual(o.Annotations, n.Annotations, writtenBack) {
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
func writtenBackChanged(o, n map[string]string, writtenBack []string) bool {
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
func otherAnnotationsEqual(o, n map[string]string, writtenBack []string) bool {
	if others(o, writtenBack) != others(n, writtenBack) {
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
func others(m map[string]string, writtenBack []string) int {
	c := len(m)
	for _, a := range writtenBack {
		if _, ok := m[a]; ok {
			c--
		}
	}
	return c
}
