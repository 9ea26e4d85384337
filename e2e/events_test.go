package e2e

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
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
