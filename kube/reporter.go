package kube

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

// Kubernetes Event reasons.
const (
	EventClaimed       = "SandboxClaimed"
	eventAdopted       = "SandboxAdopted"
	eventCapacity      = pipeline.ReasonCapacity
	eventPending       = "SandboxPending"
	eventPreserved     = "SandboxPreserved"
	eventReleased      = "SandboxReleased"
	EventReleaseFailed = "SandboxReleaseFailed"
	eventInvalid       = "SandboxInvalid"
	EventExpired       = ReasonLeaseExpired
	eventRenewed       = "SandboxLeaseRenewed"
)

var _ pipeline.Reporter = (*Provider)(nil)

// Running renders the claimed Pod and pushes it. The identity check in
// podCache.mutate drops a push whose key now names another generation.
func (p *Provider) Running(_ context.Context, ref pipeline.PodRef, c pipeline.ClaimView, adopted bool) {
	fallback := p.podIPFallback()
	pod := p.cache.mutate(ref.Key, ref.UID, func(old *corev1.Pod) *corev1.Pod {
		np := revise(old)
		claimAnnotations(np, c)
		np.Status = runningStatus(old, c, fallback)
		return np
	})
	if pod == nil {
		return
	}
	if adopted {
		p.events.Eventf(pod, corev1.EventTypeNormal, eventAdopted, "adopted VM %s at %s", c.ID, where(c, fallback))
	} else {
		p.events.Eventf(pod, corev1.EventTypeNormal, EventClaimed, "claimed VM %s at %s", c.ID, where(c, fallback))
	}
	p.push(pod)
}

// Renewed shows the renewed lease on the Pod (AnnDeadline). Its status is
// unchanged: startTime stays the claim time.
func (p *Provider) Renewed(_ context.Context, ref pipeline.PodRef, c pipeline.ClaimView) {
	pod := p.cache.mutate(ref.Key, ref.UID, func(old *corev1.Pod) *corev1.Pod {
		np := revise(old)
		claimAnnotations(np, c)
		return np
	})
	if pod == nil {
		return
	}
	p.events.Eventf(pod, corev1.EventTypeNormal, eventRenewed, "lease of VM %s renewed until %s", c.ID, c.Deadline.UTC().Format(time.RFC3339))
	p.push(pod)
}

// Warning records a Warning Event on the Pod; its status is unchanged.
func (p *Provider) Warning(_ context.Context, ref pipeline.PodRef, reason, msg string) {
	if pod := p.cache.get(ref.Key); pod != nil && string(pod.UID) == ref.UID {
		p.events.Event(pod, corev1.EventTypeWarning, reason, msg)
	}
}

// Pending keeps the Pod Pending with a reason, never terminal, and records
// an Event when the reason changes (not on every slow retry).
func (p *Provider) Pending(_ context.Context, ref pipeline.PodRef, reason, msg string) {
	changed := false
	pod := p.cache.mutate(ref.Key, ref.UID, func(old *corev1.Pod) *corev1.Pod {
		if old.Status.Phase == corev1.PodRunning {
			return old // a Running Pod is never regressed by a retry
		}
		changed = old.Status.Reason != reason
		np := revise(old)
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
func (p *Provider) Expired(_ context.Context, ref pipeline.PodRef, c pipeline.ClaimView) {
	pod := p.cache.mutate(ref.Key, ref.UID, func(old *corev1.Pod) *corev1.Pod {
		np := revise(old)
		np.Status = terminatedStatus(old, corev1.PodFailed, ReasonLeaseExpired, "the sandbox lease ended and sandboxd no longer holds it", c.ID)
		return np
	})
	if pod == nil {
		return
	}
	p.events.Eventf(pod, corev1.EventTypeWarning, EventExpired, "lease of VM %s ended", c.ID)
	p.push(pod)
}
