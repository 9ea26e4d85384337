package podload

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
)

// The null node, the floor the benchmarks compare vk-sandbox with, writes
// Running (with a Pod IP) every Pod bound to its node name and no other,
// against a real apiserver, and exits 0 on SIGTERM.
func TestNullNodeWritesItsOwnPodsRunning(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := BuildNullNode(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	env, err := kubetest.Start(ctx, kubetest.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	cs, err := Clientset(env.Config, DefaultContentType)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "null-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := kubetest.SandboxPod(ns.Name, "elsewhere", "another-node")
	if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := StartNullNode(ctx, bin, env.Kubeconfig, "null-a", DefaultContentType, filepath.Join(dir, "nullnode.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop() //nolint:errcheck // checked below; this one is for a failed test

	const want = 20
	tr := NewTracker(want)
	stop, err := Watch(ctx, cs, ns.Name, metav1.ListOptions{}, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	CreateAll(ctx, cs, tr, 4, SandboxPods(ns.Name, "null-a", want, nil), nil)
	select {
	case <-tr.Done():
	case <-ctx.Done():
		t.Fatalf("%d of %d Pods Running (with a Pod IP) before the deadline", tr.Running(), want)
	}
	if errs, last := tr.Errors(); errs > 0 {
		t.Fatalf("%d errors, the last: %s", errs, last)
	}
	// The other node's Pod existed before the null node started: had its
	// watch taken it, it would have been the first one queued and written.
	got, err := cs.CoreV1().Pods(ns.Name).Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase == corev1.PodRunning || got.Status.PodIP != "" {
		t.Errorf("the Pod bound to another node was written: phase %s, podIP %q", got.Status.Phase, got.Status.PodIP)
	}
	if err := n.Stop(); err != nil {
		t.Errorf("nullnode exit on SIGTERM: %v", err)
	}
}
