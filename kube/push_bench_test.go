package kube

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// admittedPod is a sandbox Pod as the apiserver stores it after admission:
// defaults, the service-account token volume and its mount, the default
// tolerations, requests and limits.
func admittedPod() *corev1.Pod {
	p := testkit.RunningSandboxPod()
	exp := int64(3607)
	p.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &exp}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}}}
	c := &p.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
	c.TerminationMessagePath, c.TerminationMessagePolicy, c.ImagePullPolicy = "/dev/termination-log", corev1.TerminationMessageReadFile, corev1.PullIfNotPresent
	c.Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}, {Name: "C", Value: "3"}}
	c.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")}}
	p.Spec.RestartPolicy, p.Spec.DNSPolicy, p.Spec.SchedulerName, p.Spec.ServiceAccountName = corev1.RestartPolicyNever, corev1.DNSClusterFirst, "default-scheduler", "default"
	p.Spec.Tolerations = append(p.Spec.Tolerations,
		corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		corev1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	return p
}

// BenchmarkVirtualKubeletPushWork models what virtual-kubelet does with
// each Pod the provider pushes (docs/virtual-kubelet.md, 18): compare it
// with the last one (go-cmp; the first push of a Pod compares with nil),
// deep-copy it, and encode the copy for the status write. "whole" is the
// cache entry as it was pushed before, "pushed" what Provider.push hands
// over now; the Pod is an admitted sandbox Pod (admittedPod).
func BenchmarkVirtualKubeletPushWork(b *testing.B) {
	entry := admittedPod()
	for _, bc := range []struct{ name, push string }{
		{"first/whole", "whole"}, {"first/pushed", "pushed"}, {"later/whole", "whole"}, {"later/pushed", "pushed"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			mk := func() *corev1.Pod {
				if bc.push == "whole" {
					return entry
				}
				return &corev1.Pod{TypeMeta: entry.TypeMeta, ObjectMeta: entry.ObjectMeta, Status: entry.Status}
			}
			var last *corev1.Pod // the previous push: the Pending Pod
			if strings.HasPrefix(bc.name, "later") {
				last = mk().DeepCopy()
				last.Status.Phase = corev1.PodPending
			}
			b.ReportAllocs()
			for b.Loop() {
				p := mk()
				if cmp.Equal(last, p) {
					b.Fatal("a changed Pod compared equal")
				}
				if buf, err := p.DeepCopy().Marshal(); err != nil || len(buf) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
