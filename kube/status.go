package kube

import (
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
)

// ReasonLeaseExpired is the only terminal Pod state this provider writes.
const ReasonLeaseExpired = "SandboxLeaseExpired"

// podIP is where the sandbox is reached: the host of the claim's
// owner_addr when that host is an IP, otherwise the node's fallback
// (--node-ip, or the advertise_addr sandboxd reports, when an IP). The
// apiserver rejects a status whose podIP is not an IP, so a hostname, an
// origin's name or an absent owner_addr is never written as one: with no
// fallback either, the Pod has no podIP.
func podIP(c pipeline.ClaimView, fallback netip.Addr) (netip.Addr, bool) {
	if ip, ok := pool.OwnerIP(c.Address); ok {
		return ip, true
	}
	return fallback, fallback.IsValid()
}

// where names the VM's address in Events: its IP, else owner_addr as given.
func where(c pipeline.ClaimView, fallback netip.Addr) string {
	if ip, ok := podIP(c, fallback); ok {
		return ip.String()
	}
	if c.Address != "" {
		return c.Address
	}
	return "an unadvertised address"
}

// claimAnnotations are the annotations written back with a claim.
func claimAnnotations(pod *corev1.Pod, c pipeline.ClaimView) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnClaimID] = c.ID
	if !c.Deadline.IsZero() {
		pod.Annotations[AnnDeadline] = c.Deadline.UTC().Format(time.RFC3339)
	}
}

func conditions(ready corev1.ConditionStatus, t metav1.Time, reason string) []corev1.PodCondition {
	c := func(ty corev1.PodConditionType, s corev1.ConditionStatus, r string) corev1.PodCondition {
		return corev1.PodCondition{Type: ty, Status: s, LastTransitionTime: t, Reason: r}
	}
	return []corev1.PodCondition{
		c(corev1.PodScheduled, corev1.ConditionTrue, ""),
		c(corev1.PodInitialized, corev1.ConditionTrue, ""),
		c(corev1.ContainersReady, ready, reason),
		c(corev1.PodReady, ready, reason),
	}
}

// runningStatus renders a claimed Pod. startTime is the claim time, so it
// never moves between reads or restarts.
func runningStatus(pod *corev1.Pod, c pipeline.ClaimView, fallback netip.Addr) corev1.PodStatus {
	start := metav1.NewTime(c.ClaimedAt)
	st := corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: conditions(corev1.ConditionTrue, start, ""),
		StartTime:  &start,
		QOSClass:   pod.Status.QOSClass,
	}
	if ip, ok := podIP(c, fallback); ok {
		s := ip.String()
		st.HostIP, st.HostIPs = s, []corev1.HostIP{{IP: s}}
		st.PodIP, st.PodIPs = s, []corev1.PodIP{{IP: s}}
	}
	for _, ctr := range pod.Spec.Containers {
		started := true
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name:        ctr.Name,
			Image:       ctr.Image,
			ImageID:     "sandboxd://" + c.ID,
			ContainerID: "sandboxd://" + c.ID + "/" + ctr.Name,
			Ready:       true,
			Started:     &started,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}},
		})
	}
	return st
}

// pendingStatus renders a Pod without a usable claim yet. It is never
// terminal: the pipeline keeps retrying.
func pendingStatus(pod *corev1.Pod, reason, msg string) corev1.PodStatus {
	now := metav1.Now()
	st := corev1.PodStatus{
		Phase:      corev1.PodPending,
		Reason:     reason,
		Message:    msg,
		Conditions: conditions(corev1.ConditionFalse, now, reason),
		QOSClass:   pod.Status.QOSClass,
	}
	for _, ctr := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name:  ctr.Name,
			Image: ctr.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
		})
	}
	return st
}

// terminatedStatus renders the end of a Pod: the lease ended (Failed,
// SandboxLeaseExpired) or the Pod was deleted. Every container gets a
// terminated state, as virtual-kubelet expects after DeletePod.
func terminatedStatus(pod *corev1.Pod, phase corev1.PodPhase, reason, msg string, id string) corev1.PodStatus {
	now := metav1.Now()
	st := pod.Status.DeepCopy()
	st.Phase, st.Reason, st.Message = phase, reason, msg
	st.Conditions = conditions(corev1.ConditionFalse, now, reason)
	st.ContainerStatuses = nil
	for _, ctr := range pod.Spec.Containers {
		var started metav1.Time
		if st.StartTime != nil {
			started = *st.StartTime
		}
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name:    ctr.Name,
			Image:   ctr.Image,
			ImageID: "sandboxd://" + id,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: reason, Message: msg, StartedAt: started, FinishedAt: now,
			}},
		})
	}
	return *st
}
