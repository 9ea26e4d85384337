package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// A gracefully deleted Pod is gone as soon as its VM is released, not when
// its grace period runs out: nothing runs on the node for it any more, so
// the node makes the final delete itself (virtual-kubelet would wait out
// the grace period first). The grace period here is an hour, far past the
// wait.
func TestAGracefulDeleteEndsOnceItsVMIsReleased(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	hour := int64(3600)
	createPod(t, sandboxPod(ns, "graceful", n.Name, func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &hour }))
	waitRunning(t, ns, "graceful")
	cs, _ := clients(t)
	if err := cs.CoreV1().Pods(ns).Delete(context.Background(), "graceful", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	testkit.WaitForCtx(t, waitFor, "the Pod gone well within its hour of grace", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "graceful", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if got := n.counter("release_ok"); got != 1 {
		t.Errorf("releases = %d, want 1: the Pod went before its VM was released", got)
	}
}
