package kube

import (
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// podCache holds the newest Pod object per key, with the status this
// provider rendered. Entries are copy-on-write: a stored *Pod is never
// mutated, so reads hand out the pointer without a DeepCopy.
type podCache struct {
	mu sync.RWMutex
	m  map[pipeline.PodKey]*corev1.Pod
}

func newPodCache() *podCache { return &podCache{m: map[pipeline.PodKey]*corev1.Pod{}} }

func (c *podCache) get(key pipeline.PodKey) *corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[key]
}

func (c *podCache) put(key pipeline.PodKey, p *corev1.Pod) {
	c.mu.Lock()
	c.m[key] = p
	c.mu.Unlock()
}

// mutate replaces the entry for key with fn(current) when the current entry
// is the generation uid. It returns the new object, or nil when the key now
// belongs to another generation (or none): identity is re-checked under the
// lock, so a push for an old Pod can never land on its replacement.
func (c *podCache) mutate(key pipeline.PodKey, uid string, fn func(old *corev1.Pod) *corev1.Pod) *corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m[key]
	if old == nil || string(old.UID) != uid {
		return nil
	}
	n := fn(old)
	c.m[key] = n
	return n
}

// remove drops the entry for key if it is still the generation uid.
func (c *podCache) remove(key pipeline.PodKey, uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.m[key]; p != nil && string(p.UID) == uid {
		delete(c.m, key)
		return true
	}
	return false
}

func (c *podCache) list() []*corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*corev1.Pod, 0, len(c.m))
	for _, p := range c.m {
		out = append(out, p)
	}
	return out
}

// revise returns a new entry made from pod: a struct copy with an
// annotations map of its own, for the caller to change its annotations
// and replace its status. Everything else (spec, labels, owner references,
// the old status until replaced) is shared with pod. That is safe because
// an entry is never mutated once stored, and it spares copying the whole
// Pod on every status change of every Pod.
func revise(pod *corev1.Pod) *corev1.Pod {
	np := *pod
	np.Annotations = maps.Clone(pod.Annotations)
	return &np
}
