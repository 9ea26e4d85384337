package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
)

// While sandboxd is down the node carries the sandboxd-unavailable taint,
// and a real kube-scheduler leaves new sandbox Pods unscheduled for an
// untolerated taint (one that tolerates it is bound); the node stays Ready. When sandboxd is back the taint goes, and the
// waiting Pod is bound and runs.
func TestSandboxdOutageTaintsTheNodeAndTheSchedulerWaits(t *testing.T) {
	env.StartSchedulerT(t)
	srv := simtest.Start(t, sim.Config{RootToken: rootToken, Pools: map[pool.Key]int{{Template: "default"}: 4}})
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	n := launchNode(t, srv, rootToken, nil, []string{"--sandboxd-ping-interval", "200ms", "--metrics-addr", metricsAddr})
	n.waitReady()
	ns := newNamespace(t)

	// Healthy: the scheduler binds a Pod here.
	createPod(t, unboundPod(ns, "before", n.Name))
	if p := waitRunning(t, ns, "before"); p.Spec.NodeName != n.Name {
		t.Fatalf("bound to %q, want %q", p.Spec.NodeName, n.Name)
	}

	// sandboxd's HTTP server stops.
	srv.Down()
	// The taint and the condition are two writes: wait for both.
	node := waitNode(t, n.Name, "tainted sandboxd-unavailable=unreachable, SandboxdReady False", func(node *corev1.Node) bool {
		c := nodeCondition(node, kube.ConditionSandboxdReady)
		return sandboxdTaint(node) == "unreachable" && c != nil && c.Status == corev1.ConditionFalse
	})
	c := nodeCondition(node, kube.ConditionSandboxdReady)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != kube.ReasonSandboxdUnreachable || !strings.Contains(c.Message, "connection refused") {
		t.Errorf("SandboxdReady while down = %+v", c)
	}
	if r := nodeCondition(node, corev1.NodeReady); r == nil || r.Status != corev1.ConditionTrue {
		t.Errorf("Ready while sandboxd is down = %+v: the node must stay Ready (no eviction)", r)
	}
	if kubectl, ok := kubetest.Installed("kubectl"); ok {
		out, err := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", env.Kubeconfig, "describe", "node", n.Name).CombinedOutput()
		t.Logf("kubectl describe node, sandboxd down (%v):\n%s", err, out)
	} else {
		t.Logf("the node while sandboxd is down, as kubectl describe node shows it:\n%s", describeNode(node))
	}

	// Readiness is serving the node, not sandboxd's health: the host stays
	// Ready (a DaemonSet rollout is not held up) and the detail says why
	// the node is tainted.
	code, body := testkit.Get(t, "http://"+metricsAddr+"/readyz?verbose", "")
	for _, line := range []string{"node holder: ok\n", "virtual node: ok\n", "sandboxd: unreachable: ", "state file: ok\n"} {
		if code != http.StatusOK || !strings.Contains(string(body), line) {
			t.Errorf("/readyz?verbose while down: %d %q lacks %q (or is not 200)", code, body, line)
		}
	}

	createPod(t, unboundPod(ns, "during", n.Name))
	p := waitUnschedulable(t, ns, "during")
	if p.Spec.NodeName != "" {
		t.Fatalf("bound to %q while sandboxd was down", p.Spec.NodeName)
	}
	// kube-scheduler 1.37 names no taint key in its message ("node(s) had
	// untolerated taint(s)"), so the taint is shown to be the cause by a
	// Pod that tolerates it: that one is bound. The count is not this
	// node's alone: the scheduler runs the taint filter before the node
	// selector, so other tests' tainted nodes on the shared control plane
	// are counted there too.
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && !strings.Contains(c.Message, "node(s) had untolerated taint") {
			t.Errorf("the scheduler's reason is not this node's taint: %q", c.Message)
		}
	}
	createPod(t, unboundPod(ns, "tolerant", n.Name, corev1.Toleration{Key: kube.TaintSandboxdUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))
	waitPod(t, ns, "tolerant", "bound to "+n.Name, func(p *corev1.Pod) bool { return p.Spec.NodeName == n.Name })
	if p, err := env.Clientset().CoreV1().Pods(ns).Get(t.Context(), "during", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("the intolerant Pod after the tolerant one was bound: %v, %v", p.Spec.NodeName, err)
	}

	// sandboxd comes back on the same address.
	srv.Up(t)
	waitNode(t, n.Name, "untainted", func(node *corev1.Node) bool { return sandboxdTaint(node) == "" })
	if p := waitRunning(t, ns, "during"); p.Spec.NodeName != n.Name {
		t.Fatalf("bound to %q, want %q", p.Spec.NodeName, n.Name)
	}
	waitRunning(t, ns, "tolerant")
}

// unboundPod is a sandbox Pod for the scheduler to place, on node only. It
// tolerates node.kubernetes.io/not-ready, which admission puts on every new
// Node and which only a controller manager (not run here) lifts.
func unboundPod(ns, name, node string, tolerations ...corev1.Toleration) *corev1.Pod {
	return sandboxPod(ns, name, "", func(p *corev1.Pod) {
		p.Spec.NodeSelector[corev1.LabelHostname] = node
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		p.Spec.Tolerations = append(p.Spec.Tolerations, tolerations...)
	})
}

// waitUnschedulable waits until the scheduler reports the Pod ns/name
// unschedulable.
func waitUnschedulable(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	return waitPod(t, ns, name, "reported unschedulable", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	})
}

func waitNode(t *testing.T, name, what string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	cs, _ := clients(t)
	var last *corev1.Node
	testkit.WaitForCtx(t, waitFor, "node "+name+" "+what, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n
		return cond(n), nil
	})
	return last
}

func sandboxdTaint(n *corev1.Node) string {
	for _, t := range n.Spec.Taints {
		if t.Key == kube.TaintSandboxdUnavailable && t.Effect == corev1.TaintEffectNoSchedule {
			return t.Value
		}
	}
	return ""
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// describeNode prints a Node's taints, conditions, capacity and system
// info in the layout of kubectl describe node (no kubectl in the tools).
func describeNode(n *corev1.Node) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintf(w, "Name:\t%s\n", n.Name)
	for i, t := range n.Spec.Taints {
		label := ""
		if i == 0 {
			label = "Taints:"
		}
		fmt.Fprintf(w, "%s\t%s\n", label, t.ToString())
	}
	fmt.Fprintf(w, "Unschedulable:\t%v\n", n.Spec.Unschedulable)
	w.Flush()
	fmt.Fprintln(&b, "Conditions:")
	w = tabwriter.NewWriter(&b, 0, 8, 1, ' ', 0)
	fmt.Fprintln(w, "  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage")
	fmt.Fprintln(w, "  ----\t------\t-----------------\t------------------\t------\t-------")
	for _, c := range n.Status.Conditions {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status,
			c.LastHeartbeatTime.Format("Mon, 02 Jan 2006 15:04:05 -0700"), c.LastTransitionTime.Format("Mon, 02 Jan 2006 15:04:05 -0700"), c.Reason, c.Message)
	}
	w.Flush()
	for _, section := range []struct {
		name string
		list corev1.ResourceList
	}{{"Capacity", n.Status.Capacity}, {"Allocatable", n.Status.Allocatable}} {
		fmt.Fprintf(&b, "%s:\n", section.name)
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			q := section.list[r]
			fmt.Fprintf(&b, "  %s:\t%s\n", r, q.String())
		}
	}
	fmt.Fprintln(&b, "System Info:")
	fmt.Fprintf(&b, "  Kubelet Version:\t%s\n  Operating System:\t%s\n  Architecture:\t%s\n",
		n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.OperatingSystem, n.Status.NodeInfo.Architecture)
	return b.String()
}
