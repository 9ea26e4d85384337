package kube

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// statusServer answers PUT /api/v1/namespaces/ns/pods/p/status with code,
// and a Status naming reason when code is not 200. It records the Pod it
// was sent.
func statusServer(t *testing.T, code int, reason metav1.StatusReason) (*httptest.Server, *corev1.Pod) {
	t.Helper()
	var got corev1.Pod
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.URL.Path != "/api/v1/namespaces/ns/pods/p/status" {
			t.Errorf("request %s %s, want PUT of the status subresource", r.Method, r.URL.Path)
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &got); err != nil {
			t.Errorf("body is not a Pod: %v", err)
		}
		w.Header().Set("Content-Type", runtime.ContentTypeJSON)
		w.WriteHeader(code)
		if code == http.StatusOK {
			// Not the Pod that was sent: the caller must not see it.
			_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns","resourceVersion":"99"}}`))
			return
		}
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: string(reason)})
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

// coreClientFor is a typed client of srv, unthrottled, speaking contentType.
func coreClientFor(tb testing.TB, srv *httptest.Server, contentType string) corev1client.CoreV1Interface {
	tb.Helper()
	rc := &rest.Config{Host: srv.URL, QPS: -1}
	UseContentType(rc, contentType)
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		tb.Fatal(err)
	}
	return cs.CoreV1()
}

func statusWriterFor(t *testing.T, srv *httptest.Server) undecodedStatusPods {
	return undecodedStatusPods{coreClientFor(t, srv, runtime.ContentTypeJSON)}
}

func TestStatusWriteSendsThePodAndReturnsItUndecoded(t *testing.T) {
	srv, sent := statusServer(t, http.StatusOK, "")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "7"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}}
	got, err := statusWriterFor(t, srv).Pods("ns").UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got != pod {
		t.Errorf("UpdateStatus returned %+v, want the Pod it was given", got)
	}
	if sent.ResourceVersion != "7" || sent.Status.Phase != corev1.PodRunning || sent.Status.PodIP != "10.0.0.1" {
		t.Errorf("the apiserver got %+v, want the Pod's resourceVersion and status", sent)
	}
}

// virtual-kubelet tells a Pod that is gone (404) from a failure it must
// retry: the error must keep its type without the answer being decoded.
func TestStatusWriteErrorsKeepTheirType(t *testing.T) {
	for _, tc := range []struct {
		code   int
		reason metav1.StatusReason
		is     func(error) bool
	}{
		{http.StatusNotFound, metav1.StatusReasonNotFound, apierrors.IsNotFound},
		{http.StatusConflict, metav1.StatusReasonConflict, apierrors.IsConflict},
		{http.StatusInternalServerError, metav1.StatusReasonInternalError, apierrors.IsInternalError},
	} {
		t.Run(string(tc.reason), func(t *testing.T) {
			srv, _ := statusServer(t, tc.code, tc.reason)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
			got, err := statusWriterFor(t, srv).Pods("ns").UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
			if !tc.is(err) || got != nil {
				t.Fatalf("UpdateStatus = %v, %v; want nil and a %s error", got, err, tc.reason)
			}
		})
	}
}

// BenchmarkStatusWrite compares virtual-kubelet's status write through the
// typed client (which decodes the Pod answered) and through
// undecodedStatusPods, against a server answering a sandbox Pod in
// protobuf, as the apiserver does.
func BenchmarkStatusWrite(b *testing.B) {
	pod := benchPod()
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	answer, err := runtime.Encode(scheme.Codecs.EncoderForVersion(ser, corev1.SchemeGroupVersion), pod)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		_, _ = w.Write(answer)
	}))
	b.Cleanup(srv.Close)
	core := coreClientFor(b, srv, runtime.ContentTypeProtobuf)
	for name, pods := range map[string]corev1client.PodsGetter{"typed": core, "undecoded": undecodedStatusPods{core}} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := pods.Pods("ns").UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchPod is a sandbox Pod as a node holds it once Running.
func benchPod() *corev1.Pod {
	t := metav1.Now()
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "agent-7f9c", Namespace: "team-a", UID: "5f1c1f0e-6a3b-4f7e-9a53-0b7c1d2e3f40",
			ResourceVersion: "123456", CreationTimestamp: t,
			Labels: map[string]string{"agents.x-k8s.io/sandbox-name-hash": "4fe7f1a6", "app": "agent"},
			Annotations: map[string]string{AnnClaimID: "sb_6729611cf7cee115", AnnTemplate: "default",
				AnnPodUID: "5f1c1f0e-6a3b-4f7e-9a53-0b7c1d2e3f40"},
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
