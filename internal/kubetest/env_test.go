package kubetest

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// fakeNode is never registered: a Pod bound to it is stored and served but
// nothing schedules or runs it.
const fakeNode = "kubetest-fake-node"

func testPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:   fakeNode,
			Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none:0"}},
		},
	}
}

func createNamespaceAndPod(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, testPod(ns, name), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return pod
}

func TestRealAPIServerServesNamespacesAndPods(t *testing.T) {
	env := StartT(t)
	ctx := t.Context()
	cs := env.Clientset()

	created := createNamespaceAndPod(t, ctx, cs, "smoke", "p1")
	got, err := cs.CoreV1().Pods("smoke").Get(ctx, "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod smoke/p1: %v", err)
	}
	if got.UID != created.UID || got.Spec.NodeName != fakeNode {
		t.Fatalf("pod smoke/p1 read back as uid=%s node=%q, want uid=%s node=%q", got.UID, got.Spec.NodeName, created.UID, fakeNode)
	}

	// The kubeconfig file must describe the same cluster and identity.
	kc, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", env.Kubeconfig, err)
	}
	kcs := kubernetes.NewForConfigOrDie(kc)
	if _, err := kcs.CoreV1().Pods("smoke").Get(ctx, "p1", metav1.GetOptions{}); err != nil {
		t.Fatalf("get pod via kubeconfig: %v", err)
	}
}

func TestAPIServerRestartKeepsPods(t *testing.T) {
	env := StartT(t)
	ctx := t.Context()
	cs := env.Clientset()
	created := createNamespaceAndPod(t, ctx, cs, "fault", "survivor")
	host := env.Config.Host

	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Pods("fault").Get(short, "survivor", metav1.GetOptions{}); err == nil {
		t.Fatal("get pod succeeded while kube-apiserver was stopped")
	}
	if err := env.StopAPIServer(); err == nil {
		t.Fatal("second StopAPIServer succeeded, want an error")
	}

	if err := env.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if env.Config.Host != host {
		t.Fatalf("apiserver moved from %s to %s", host, env.Config.Host)
	}
	// The old clientset must work unchanged: same port, token and CA.
	got, err := cs.CoreV1().Pods("fault").Get(ctx, "survivor", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod after restart: %v", err)
	}
	if got.UID != created.UID {
		t.Fatalf("pod after restart has uid %s, want %s", got.UID, created.UID)
	}
}

func TestUserTokenIsAuthenticatedAndSubjectToRBAC(t *testing.T) {
	env := StartTWith(t, Options{Users: []User{{Name: "alice", Token: "alice-token", Groups: []string{"testers"}}}})
	ctx := t.Context()

	alice := kubernetes.NewForConfigOrDie(env.UserConfig("alice-token"))
	_, err := alice.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("alice without bindings listed namespaces: err=%v, want Forbidden", err)
	}
	if !strings.Contains(err.Error(), `"alice"`) {
		t.Fatalf("forbidden error does not name the user: %v", err)
	}

	nobody := kubernetes.NewForConfigOrDie(env.UserConfig("no-such-token"))
	if _, err := nobody.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("unknown token: err=%v, want Unauthorized", err)
	}
}

const widgetCRD = `
# leading comment and an empty document are fine
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.kubetest.example.com
spec:
  group: kubetest.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, maximum: 10}
`

func TestInstallCRDsServesCustomResources(t *testing.T) {
	env := StartT(t)
	ctx := t.Context()
	if err := env.InstallCRDBytes(ctx, []byte(widgetCRD)); err != nil {
		t.Fatal(err)
	}
	// Idempotent: tests may install the same CRDs in every setup.
	if err := env.InstallCRDBytes(ctx, []byte(widgetCRD)); err != nil {
		t.Fatalf("second install: %v", err)
	}

	dyn := dynamic.NewForConfigOrDie(env.Config)
	gvr := schema.GroupVersionResource{Group: "kubetest.example.com", Version: "v1", Resource: "widgets"}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubetest.example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w1", "namespace": "default"},
		"spec":       map[string]any{"size": int64(3)},
	}}
	if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create widget default/w1: %v", err)
	}
	got, err := dyn.Resource(gvr).Namespace("default").Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get widget default/w1: %v", err)
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 3 {
		t.Fatalf("widget default/w1 spec.size = %d, want 3", size)
	}
}

func TestDecodeCRDsRejectsOtherKinds(t *testing.T) {
	_, err := decodeCRDs([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), "cm.yaml")
	if err == nil || !strings.Contains(err.Error(), "not a CustomResourceDefinition") {
		t.Fatalf("decode ConfigMap: err=%v, want not-a-CRD error", err)
	}
	objs, err := decodeCRDs([]byte(widgetCRD), "widget.yaml")
	if err != nil || len(objs) != 1 || objs[0].GetName() != "widgets.kubetest.example.com" {
		t.Fatalf("decode widget CRD: %d objects, err=%v", len(objs), err)
	}
}
