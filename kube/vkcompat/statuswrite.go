package vkcompat

// The undecoded status write (docs/virtual-kubelet.md, 6).
//
// Behaviour: virtual-kubelet's pod controller writes a Pod's status with
// UpdateStatus and discards the Pod the apiserver answers with.
// Pinned by: TestStatusWriteSendsThePodAndReturnsItUndecoded,
// TestStatusWriteErrorsKeepTheirType, and in kube
// TestPodStatusWritesDoNotDecodeTheAnswer (the wiring).

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// UndecodedStatusPods is the Pod client virtual-kubelet's pod controller
// writes through. It is the typed client except for UpdateStatus, which
// does not decode the Pod the apiserver answers with: virtual-kubelet
// discards that answer, and decoding a whole Pod for every status write is
// work a dense node does thousands of times for nothing. Errors are
// decoded as the typed client decodes them (a 404 is still IsNotFound, a
// conflict IsConflict).
type UndecodedStatusPods struct {
	Client corev1client.CoreV1Interface
}

func (g UndecodedStatusPods) Pods(namespace string) corev1client.PodInterface {
	return undecodedStatusPodInterface{PodInterface: g.Client.Pods(namespace), client: g.Client, namespace: namespace}
}

type undecodedStatusPodInterface struct {
	corev1client.PodInterface
	client    corev1client.CoreV1Interface
	namespace string
}

// UpdateStatus writes pod's status and returns pod itself, not the
// apiserver's answer: the caller must not rely on the returned object's
// resourceVersion.
func (p undecodedStatusPodInterface) UpdateStatus(ctx context.Context, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error) {
	err := p.client.RESTClient().Put().
		Namespace(p.namespace).
		Resource("pods").
		Name(pod.Name).
		SubResource("status").
		VersionedParams(&opts, scheme.ParameterCodec).
		Body(pod).
		Do(ctx).
		Error()
	if err != nil {
		return nil, err
	}
	return pod, nil
}
