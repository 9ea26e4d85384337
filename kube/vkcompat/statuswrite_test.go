package vkcompat

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/metrics"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
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
	rc.ContentType, rc.AcceptContentTypes = contentType, contentType
	if contentType != runtime.ContentTypeJSON {
		rc.AcceptContentTypes += "," + runtime.ContentTypeJSON // as kube.UseContentType sets it
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		tb.Fatal(err)
	}
	return cs.CoreV1()
}

func statusWriterFor(t *testing.T, srv *httptest.Server) UndecodedStatusPods {
	return NewUndecodedStatusPods(coreClientFor(t, srv, runtime.ContentTypeJSON))
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
// UndecodedStatusPods, against a server answering a sandbox Pod in
// protobuf, as the apiserver does.
func BenchmarkStatusWrite(b *testing.B) {
	pod := testkit.RunningSandboxPod()
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
	for name, pods := range map[string]corev1client.PodsGetter{"typed": core, "undecoded": NewUndecodedStatusPods(core)} {
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

// clientMetrics records what client-go's request hooks are told.
type clientMetrics struct {
	mu        sync.Mutex
	latencies []string // verb host
	results   []string // code method host
}

func (m *clientMetrics) Observe(_ context.Context, verb string, u url.URL, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.latencies = append(m.latencies, verb+" "+u.Host)
}

func (m *clientMetrics) Increment(_ context.Context, code, method, host string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results = append(m.results, code+" "+method+" "+host)
}

// A status write that skips the answer still counts in client-go's
// request metrics as the typed client's would: one latency by verb and
// host, and one result by code, whether the write succeeds or fails.
func TestStatusWriteIsCountedInTheClientsRequestMetrics(t *testing.T) {
	rec := &clientMetrics{}
	prevLatency, prevResult := metrics.RequestLatency, metrics.RequestResult
	metrics.RequestLatency, metrics.RequestResult = rec, rec
	t.Cleanup(func() { metrics.RequestLatency, metrics.RequestResult = prevLatency, prevResult })

	ok, _ := statusServer(t, http.StatusOK, "")
	gone, _ := statusServer(t, http.StatusNotFound, metav1.StatusReasonNotFound)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	if _, err := statusWriterFor(t, ok).Pods("ns").UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := statusWriterFor(t, gone).Pods("ns").UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("err = %v, want NotFound", err)
	}
	okHost, goneHost := strings.TrimPrefix(ok.URL, "http://"), strings.TrimPrefix(gone.URL, "http://")
	wantLatency := []string{"PUT " + okHost, "PUT " + goneHost}
	wantResults := []string{"200 PUT " + okHost, "404 PUT " + goneHost}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Equal(rec.latencies, wantLatency) || !slices.Equal(rec.results, wantResults) {
		t.Errorf("client metrics: latencies %q, results %q; want %q and %q", rec.latencies, rec.results, wantLatency, wantResults)
	}
}
