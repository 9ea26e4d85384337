package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/kube/kubeletapi"
	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// claimedPods is the provider as the kubelet API's interactive surfaces
// see it: the Pods it serves, from memory, and the engine's durable claim
// of each Pod generation.
type claimedPods struct{ p *Provider }

var _ kubeletapi.Pods = claimedPods{}

func (c claimedPods) Pod(key pipeline.PodKey) *corev1.Pod { return c.p.cache.get(key) }

func (c claimedPods) Pods() []*corev1.Pod { return c.p.cache.list() }

// Credential is the engine's: set once newProvider has built it, before
// the node serves a request.
func (c claimedPods) Credential(key pipeline.PodKey, podUID string) (id, token string, ok bool) {
	return c.p.engine.Credential(key, podUID)
}
