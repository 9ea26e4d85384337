package vkcompat

// The undecoded status write (docs/virtual-kubelet.md, 6).
//
// Behaviour: virtual-kubelet's pod controller writes a Pod's status with
// UpdateStatus and discards the Pod the apiserver answers with.
// Pinned by: TestStatusWriteSendsThePodAndReturnsItUndecoded,
// TestStatusWriteErrorsKeepTheirType,
// TestStatusWriteIsCountedInTheClientsRequestMetrics, and in kube
// TestPodStatusWritesDoNotDecodeTheAnswer (the wiring).

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/metrics"
)

// UndecodedStatusPods is the Pod client virtual-kubelet's pod controller
// writes through. It is the typed client except for UpdateStatus, which
// does not read the Pod the apiserver answers with into memory, nor decode
// it: virtual-kubelet discards that answer, and a whole Pod read and
// decoded for every status write is work a dense node does thousands of
// times for nothing. Errors are decoded as the typed client decodes them
// (a 404 is still IsNotFound, a conflict IsConflict). Build it with
// NewUndecodedStatusPods.
type UndecodedStatusPods struct {
	Client corev1client.CoreV1Interface
	host   url.URL // the apiserver, as client-go's latency metric names it
}

// NewUndecodedStatusPods is the status writer over c.
func NewUndecodedStatusPods(c corev1client.CoreV1Interface) UndecodedStatusPods {
	return UndecodedStatusPods{Client: c, host: apiserverOf(c)}
}

// apiserverOf is the scheme and host c's requests go to; empty for a
// client that has no REST client (a fake).
func apiserverOf(c corev1client.CoreV1Interface) url.URL {
	rc, ok := c.RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return url.URL{}
	}
	u := rc.Get().URL()
	return url.URL{Scheme: u.Scheme, Host: u.Host}
}

func (g UndecodedStatusPods) Pods(namespace string) corev1client.PodInterface {
	return undecodedStatusPodInterface{PodInterface: g.Client.Pods(namespace), client: g.Client, namespace: namespace, host: g.host}
}

type undecodedStatusPodInterface struct {
	corev1client.PodInterface
	client    corev1client.CoreV1Interface
	namespace string
	host      url.URL
}

// UpdateStatus writes pod's status and returns pod itself, not the
// apiserver's answer: the caller must not rely on the returned object's
// resourceVersion.
//
// It sends the request as the typed client does, through client-go's
// rate limiter, retries and result metric (Stream), and drains the
// answer through io.Discard's pooled buffer. Stream leaves out the one
// thing Do adds: the request's latency metric, recorded here as Do
// records it (from before the rate limiter to the answer's end), by
// verb and host, without the URL template Do computes for every request.
func (p undecodedStatusPodInterface) UpdateStatus(ctx context.Context, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error) {
	start := time.Now()
	body, err := p.client.RESTClient().Put().
		Namespace(p.namespace).
		Resource("pods").
		Name(pod.Name).
		SubResource("status").
		VersionedParams(&opts, scheme.ParameterCodec).
		Body(pod).
		Stream(ctx)
	if err == nil {
		_, err = io.Copy(io.Discard, body)
		if cerr := body.Close(); err == nil {
			err = cerr
		}
	}
	metrics.RequestLatency.Observe(ctx, http.MethodPut, p.host, time.Since(start))
	if err != nil {
		return nil, err
	}
	return pod, nil
}
