package vkcompat

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Resource versions order two generations of a name whatever their
// creation timestamps say; only without comparable versions do the
// timestamps decide, and a generation of the same second is the newer one.
func TestNewerGenerationOrdersByResourceVersionThenByCreation(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	gen := func(uid, rv string, created time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: rv,
			CreationTimestamp: metav1.NewTime(created)}}
	}
	for _, c := range []struct {
		name     string
		pod, cur *corev1.Pod
		newer    bool
	}{
		{"a higher version", gen("2", "120", at), gen("1", "99", at), true},
		{"a lower version", gen("2", "99", at), gen("1", "120", at), false},
		{"a higher version stamped by a lagging clock", gen("2", "120", at.Add(-time.Minute)), gen("1", "99", at), true},
		{"a lower version stamped by a leading clock", gen("2", "99", at.Add(time.Minute)), gen("1", "120", at), false},
		{"no versions, created later", gen("2", "", at.Add(time.Second)), gen("1", "", at), true},
		{"no versions, created earlier", gen("2", "", at.Add(-time.Second)), gen("1", "", at), false},
		{"no versions, the same second", gen("2", "", at), gen("1", "", at), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := NewerGeneration(c.pod, c.cur); got != c.newer {
				t.Fatalf("NewerGeneration(rv %q created %v, rv %q created %v) = %v, want %v",
					c.pod.ResourceVersion, c.pod.CreationTimestamp.Time, c.cur.ResourceVersion, c.cur.CreationTimestamp.Time, got, c.newer)
			}
		})
	}
}
