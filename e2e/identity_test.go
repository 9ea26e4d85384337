package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
)

// TestKubeletCredentialCannotServeTheVirtualNode backs docs/install.md,
// "Why not the host kubelet's credential", on an apiserver with the Node
// authorizer and the NodeRestriction admission plugin, as clusters run
// them: the identity system:node:<host> may register its own Node, but
// not <host>-sandboxd, nor read a Pod bound to it.
func TestKubeletCredentialCannotServeTheVirtualNode(t *testing.T) {
	const host, token = "host1", "kubelet-host1-token"
	nodeEnv := kubetest.StartTWith(t, kubetest.Options{
		Users: []kubetest.User{{Name: "system:node:" + host, Token: token, Groups: []string{"system:nodes"}}},
		// --authorization-mode adds to the control plane's RBAC: RBAC,Node.
		ExtraAPIServerFlags: []string{"--authorization-mode=Node", "--enable-admission-plugins=NodeRestriction"},
	})
	ctx := context.Background()
	kubelet, err := kubernetes.NewForConfig(nodeEnv.UserConfig(token))
	if err != nil {
		t.Fatal(err)
	}
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

	if _, err := kubelet.CoreV1().Nodes().Create(ctx, node(host), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the kubelet credential cannot register its own Node (the control plane is not set up as the test means): %v", err)
	}
	_, err = kubelet.CoreV1().Nodes().Create(ctx, node(host+"-sandboxd"), metav1.CreateOptions{})
	want := `node "` + host + `" is not allowed to modify node "` + host + `-sandboxd"`
	t.Logf("register %s-sandboxd as system:node:%s: %v", host, host, err)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("registering %s-sandboxd as system:node:%s: err=%v, want one saying %s", host, host, err, want)
	}

	admin := nodeEnv.Clientset()
	if _, err := admin.CoreV1().Nodes().Create(ctx, node(host+"-sandboxd"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := kubetest.SandboxPod("default", "bound", host+"-sandboxd")
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = kubelet.CoreV1().Pods("default").Get(ctx, "bound", metav1.GetOptions{})
	want = "no relationship found between node '" + host + "' and this object"
	t.Logf("read a Pod bound to %s-sandboxd as system:node:%s: %v", host, host, err)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("reading a Pod bound to %s-sandboxd as system:node:%s: err=%v, want one saying %s", host, host, err, want)
	}
}
