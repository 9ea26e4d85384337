package kubetest

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/kube"
)

// SandboxPod is a sandbox Pod as the operator's runtime mutator leaves it
// (template annotation, nodeSelector, toleration), bound straight to the
// virtual node so no scheduler is needed. The e2e suite, the demo and the
// burst harness all start from it.
func SandboxPod(namespace, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: map[string]string{
			kube.AnnTemplate: "default",
		}},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{kube.LabelRuntime: kube.RuntimeSandboxd},
			Tolerations:   []corev1.Toleration{{Key: kube.TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers:    []corev1.Container{{Name: "agent", Image: "sandbox:latest"}},
		},
	}
}

// NodeReady reports whether the node exists and its Ready condition is
// True: the moment a virtual node's pod controller runs.
func NodeReady(ctx context.Context, cs kubernetes.Interface, name string) bool {
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
