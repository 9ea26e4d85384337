package podload

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
)

// SandboxPods are n sandbox Pods (kubetest.SandboxPod) named p-00000...
// in namespace ns, bound to node, each with labels.
func SandboxPods(ns, node string, n int, labels map[string]string) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = kubetest.SandboxPod(ns, fmt.Sprintf("p-%05d", i), node)
		if len(labels) > 0 {
			out[i].Labels = labels
		}
	}
	return out
}

// CreateAll creates the Pods, in order, with a bounded pool of workers.
// Each created Pod is handed to then (if not nil) by the worker that
// created it.
func CreateAll(ctx context.Context, cs kubernetes.Interface, t *Tracker, workers int, pods []*corev1.Pod, then func(*corev1.Pod)) {
	next := make(chan *corev1.Pod)
	var wg sync.WaitGroup
	for range min(workers, len(pods)) {
		wg.Go(func() {
			for p := range next {
				t.CreateStarted(p, time.Now())
				out, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
				if err != nil {
					t.Fail(fmt.Errorf("create %s/%s: %w", p.Namespace, p.Name, err))
					continue
				}
				t.CreateAcked(p, time.Now())
				if then != nil {
					then(out)
				}
			}
		})
	}
	for _, p := range pods {
		select {
		case next <- p:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
}

// FakeRunning is close to what the provider renders for a claimed Pod
// (kube.runningStatus), so that bare and provider runs write objects of
// about the same size. i makes the Pod IP and sandbox id distinct.
func FakeRunning(p *corev1.Pod, i int) corev1.PodStatus {
	ip := fmt.Sprintf("10.%d.%d.%d", 64+i/62500, i/250%250, 1+i%250)
	now := metav1.Now()
	c := func(ty corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: ty, Status: corev1.ConditionTrue, LastTransitionTime: now}
	}
	started := true
	id := fmt.Sprintf("sb_%016x", i)
	return corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{c(corev1.PodScheduled), c(corev1.PodInitialized), c(corev1.ContainersReady), c(corev1.PodReady)},
		HostIP:     ip, HostIPs: []corev1.HostIP{{IP: ip}},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		StartTime: &now,
		QOSClass:  p.Status.QOSClass,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "agent", Image: "sandbox:latest", ImageID: "sandboxd://" + id, ContainerID: "sandboxd://" + id + "/agent",
			Ready: true, Started: &started, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
}

// RunBare is the apiserver's own limit: the Pods' creates (CreateAll, the
// same pool as a provider run) and one status update to Running each from
// a second pool of workers, with no provider. The Pods should name a node
// that does not exist.
func RunBare(ctx context.Context, cs kubernetes.Interface, pods []*corev1.Pod, workers int, t *Tracker) {
	RunBareAs(ctx, cs, func(*corev1.Pod) kubernetes.Interface { return cs }, pods, workers, t)
}

// RunBareAs is RunBare with each status write sent by writer(pod), such
// as the client of the user that a node would write it as.
func RunBareAs(ctx context.Context, cs kubernetes.Interface, writer func(*corev1.Pod) kubernetes.Interface, pods []*corev1.Pod, workers int, t *Tracker) {
	type created struct {
		p *corev1.Pod
		i int
	}
	ch := make(chan created, len(pods))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c := range ch {
				c.p.Status = FakeRunning(c.p, c.i)
				if _, err := writer(c.p).CoreV1().Pods(c.p.Namespace).UpdateStatus(ctx, c.p, metav1.UpdateOptions{}); err != nil {
					t.Fail(fmt.Errorf("update status %s/%s: %w", c.p.Namespace, c.p.Name, err))
					continue
				}
				t.StatusAcked(c.p, time.Now())
			}
		})
	}
	var seq atomic.Int64 // distinct IPs, in acknowledgement order
	CreateAll(ctx, cs, t, workers, pods, func(p *corev1.Pod) {
		ch <- created{p, int(seq.Add(1) - 1)}
	})
	close(ch)
	wg.Wait()
}
