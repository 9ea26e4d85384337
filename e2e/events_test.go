package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// Past the node's Event budget a Normal Event is shed and counted, never
// lost without a trace: every claim's SandboxClaimed is either written to
// the apiserver or counted in vksandbox_events_shed_total.
func TestEventsPastTheBudgetAreShedAndCounted(t *testing.T) {
	margs, scrape := metricsArgs(t)
	// A budget of its burst alone: two Normal Events, then about one an hour.
	n := startNode(t, sim.Config{}, append(margs, "--event-qps", "0.0003", "--event-burst", "2")...)
	ns := newNamespace(t)
	const pods = 6
	for i := range pods {
		createPod(t, sandboxPod(ns, fmt.Sprintf("ev%d", i), n.Name))
	}
	for i := range pods {
		waitRunning(t, ns, fmt.Sprintf("ev%d", i))
	}
	cs, _ := clients(t)
	var written, shed float64
	testkit.WaitForCtx(t, waitFor, "every SandboxClaimed written or counted as shed", func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		written = 0
		for _, e := range l.Items {
			if e.Reason == kube.EventClaimed {
				written++
			}
		}
		shed, _ = metricSum(t, scrape, "vksandbox_events_shed_total", `reason="`+kube.EventClaimed+`"`)
		return written+shed == pods, nil
	})
	if written > 2 || shed < pods-2 {
		t.Fatalf("%v SandboxClaimed Events written and %v shed, with a budget of 2", written, shed)
	}
}

// virtual-kubelet writes an empty Normal "ProviderCreateSuccess" Event for
// every Pod it hands to the provider; the node drops it (it says nothing
// that SandboxClaimed does not, and it would double the Event writes).
// The broadcaster writes one node's Events in the order they were
// recorded, and virtual-kubelet records its own before the claim ends, so
// once every SandboxClaimed is in, none of those can still be on its way.
func TestVirtualKubeletsEmptyCreateEventIsNotWritten(t *testing.T) {
	n := startNode(t, sim.Config{})
	ns := newNamespace(t)
	const pods = 3
	for i := range pods {
		createPod(t, sandboxPod(ns, fmt.Sprintf("q%d", i), n.Name))
	}
	cs, _ := clients(t)
	reasons := map[string]int{}
	testkit.WaitForCtx(t, waitFor, "a SandboxClaimed Event for every Pod", func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		clear(reasons)
		for _, e := range l.Items {
			reasons[e.Reason]++
		}
		return reasons[kube.EventClaimed] == pods, nil
	})
	if got := reasons["ProviderCreateSuccess"]; got != 0 {
		t.Errorf("%d ProviderCreateSuccess Events written; want none (Events by reason: %v)", got, reasons)
	}
}

// A Normal Event's write waits while a Pod of the node waits for its claim
// (--event-yield), so informational writes never compete with the claims
// they describe; a Warning is written meanwhile, and the waiting Event is
// written once the node is idle.
func TestSandboxClaimedEventIsWrittenOnceTheNodeIsIdle(t *testing.T) {
	margs, scrape := metricsArgs(t)
	// A wait far longer than the test: only the node going idle ends it.
	n := startNode(t, sim.Config{}, append(margs, "--event-yield", "1h", "--event-qps", "0.2", "--event-burst", "10", "--requeue-max", "1s")...)
	ns := newNamespace(t)
	// No pool has this template: each attempt is refused, and the Pod
	// keeps its claim intent, so the node stays busy.
	createPod(t, sandboxPod(ns, "stuck", n.Name, func(p *corev1.Pod) { p.Annotations[kube.AnnTemplate] = "absent" }))
	testkit.WaitForCtx(t, waitFor, "the stuck Pod's Warning, written while the node is busy", func(context.Context) (bool, error) {
		return len(events(t, ns, "stuck", pipeline.ReasonClaimFailed)) > 0, nil
	})

	createPod(t, sandboxPod(ns, "claimed", n.Name))
	waitRunning(t, ns, "claimed")
	testkit.WaitForCtx(t, waitFor, "the claimed Pod's SandboxClaimed waiting", func(context.Context) (bool, error) {
		v, ok := metricSum(t, scrape, "vksandbox_events_waiting")
		return ok && v == 1, nil
	})
	if got := events(t, ns, "claimed", kube.EventClaimed); len(got) != 0 {
		t.Fatalf("SandboxClaimed written while the node is busy: %v", got)
	}
	// A Warning recorded now is written while SandboxClaimed waits:
	// Warnings have a writer of their own.
	createPod(t, sandboxPod(ns, "stuck2", n.Name, func(p *corev1.Pod) { p.Annotations[kube.AnnTemplate] = "absent" }))
	testkit.WaitForCtx(t, waitFor, "a Warning written while a Normal Event waits", func(context.Context) (bool, error) {
		return len(events(t, ns, "stuck2", pipeline.ReasonClaimFailed)) > 0, nil
	})

	deletePod(t, ns, "stuck")
	deletePod(t, ns, "stuck2")
	testkit.WaitForCtx(t, waitFor, "SandboxClaimed written once the node is idle", func(context.Context) (bool, error) {
		return len(events(t, ns, "claimed", kube.EventClaimed)) == 1, nil
	})
	if v, ok := metricSum(t, scrape, "vksandbox_events_waiting"); !ok || v != 0 {
		t.Fatalf("vksandbox_events_waiting = %v (scraped: %v) once the Event is written, want 0", v, ok)
	}
}
