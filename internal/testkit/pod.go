package testkit

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunningSandboxPod is a sandbox Pod as a node holds it once Running: its
// claim-id, template and pod-uid annotations set, owned by a Sandbox.
func RunningSandboxPod() *corev1.Pod {
	t := metav1.Now()
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "agent-7f9c", Namespace: "team-a", UID: "5f1c1f0e-6a3b-4f7e-9a53-0b7c1d2e3f40",
			ResourceVersion: "123456", CreationTimestamp: t,
			Labels: map[string]string{"agents.x-k8s.io/sandbox-name-hash": "4fe7f1a6", "app": "agent"},
			Annotations: map[string]string{"sandbox.cocoonstack.io/claim-id": "sb_6729611cf7cee115",
				"sandbox.cocoonstack.io/template": "default",
				"sandbox.cocoonstack.io/pod-uid":  "5f1c1f0e-6a3b-4f7e-9a53-0b7c1d2e3f40"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: "agent-7f9c",
				UID: "0c8d9e2f-1111-4a2b-8c3d-4e5f60718293"}},
		},
		Spec: corev1.PodSpec{
			NodeName:     "worker-1-sandboxd",
			NodeSelector: map[string]string{"type": "virtual-kubelet"},
			Tolerations:  []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{Name: "agent", Image: "ghcr.io/example/agent:1.2.3",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.77.0.1", PodIPs: []corev1.PodIP{{IP: "10.77.0.1"}}, HostIP: "10.0.0.5", StartTime: &t,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", Ready: true, Image: "ghcr.io/example/agent:1.2.3",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}}}},
		},
	}
}
