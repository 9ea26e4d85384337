package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// Kubernetes Event reasons.
const (
	EventClaimed       = "SandboxClaimed"
	EventAdopted       = "SandboxAdopted"
	EventCapacity      = pipeline.ReasonCapacity
	EventPending       = "SandboxPending"
	EventPreserved     = "SandboxPreserved"
	EventReleased      = "SandboxReleased"
	EventReleaseFailed = "SandboxReleaseFailed"
	EventInvalid       = "SandboxInvalid"
	EventExpired       = ReasonLeaseExpired
)

var _ pipeline.Reporter = (*Provider)(nil)

// Running renders the claimed Pod and pushes it. The identity check in
// podCache.mutate drops a push whose key now names another generation.
func (p *Provider) Running(_ context.Context, ref pipeline.PodRef, c store.Claim, adopted bool) {
	pod := p.pods.mutate(ref.Key, ref.UID, func(old *corev1.Pod) *corev1.Pod {
		np := old.DeepCopy()
		if np.Annotations == nil {
			np.Annotations = map[string]string{}
		}
		np.Annotations[AnnClaimID] = c.ID
		np.Status = runningStatus(old, c)
		return np
	})
	if pod == nil {
		return
	}
	if adopted {
		p.events.Eventf(pod, corev1.EventTypeNormal, EventAdopted, "adopted VM %s at %s", c.ID, hostOf(c.Address))
	} else {
		p.events.Eventf(pod, corev1.EventTypeNormal, EventClaimed, "claimed VM %s at %s", c.ID, hostOf(c.Address))
	}
	p.push(pod)
}

// Pending keeps the Pod Pending with a reason, never terminal, and records
// an Event when the reason changes (not on every slow retry).
func (p *Provider) Pending(_ context.Context, ref pipeline.PodRef, reason, msg string) {
	changed := false
	pod := p.pods.mutate(ref.Key, ref.UID, func(old *corev1.Pod) *corev1.Pod {
		if old.Status.Phase == corev1.PodRunning {
			return old // a Running Pod is never regressed by a retry
		}
		changed = old.Status.Reason != reason
		np := old.DeepCopy()
		np.Status = pendingStatus(old, reason, msg)
		return np
	})
	if pod == nil || !changed {
		return
	}
	p.events.Event(pod, corev1.EventTypeWarning, reason, msg)
	p.push(pod)
}

// Expired marks the Pod Failed/SandboxLeaseExpired: the only terminal state.
func (p *Provider) Expired(_ context.Context, ref pipeline.PodRef, c store.Claim) {
	pod := p.pods.mutate(ref.Key, ref.UID, func(old *corev1.Pod) *corev1.Pod {
		np := old.DeepCopy()
		np.Status = terminatedStatus(old, corev1.PodFailed, ReasonLeaseExpired, "the sandbox lease ended and sandboxd no longer holds it", c.ID)
		return np
	})
	if pod == nil {
		return
	}
	p.events.Eventf(pod, corev1.EventTypeWarning, EventExpired, "lease of VM %s ended", c.ID)
	p.push(pod)
}
