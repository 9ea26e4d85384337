package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// Interop with the real upstream controller (sigs.k8s.io/agent-sandbox,
// built by scripts/build-tools.sh from tools/agent-sandbox into
// bin/agent-sandbox-controller) and its real CRDs (testdata/agent-sandbox-crds).

const agentSandboxCRDs = "testdata/agent-sandbox-crds"

var sandboxV1beta1GVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

// installAgentSandboxCRDs installs the upstream CRDs. The upstream Sandbox
// CRD serves only v1beta1, while the rest of this suite owns Pods with
// v1alpha1 Sandboxes (manifests/test/sandbox-owner-crd.yaml, same CRD
// name). A stored version cannot leave spec.versions, so the installed CRD
// is the upstream one plus the test's v1alpha1 as a served, non-storage
// version (conversion None): a superset, whatever the test order.
func installAgentSandboxCRDs(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join(agentSandboxCRDs, "agents.x-k8s.io_sandboxes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := map[string]any{}
	if err := utilyaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: crd}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	versions = append(versions, map[string]any{
		"name": "v1alpha1", "served": true, "storage": false,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
	})
	if err := unstructured.SetNestedSlice(u.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	merged, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDBytes(ctx, merged); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for _, f := range []string{
		"extensions.agents.x-k8s.io_sandboxclaims.yaml",
		"extensions.agents.x-k8s.io_sandboxtemplates.yaml",
		"extensions.agents.x-k8s.io_sandboxwarmpools.yaml",
	} {
		rest = append(rest, filepath.Join(agentSandboxCRDs, f))
	}
	if err := env.InstallCRDs(ctx, rest...); err != nil {
		t.Fatal(err)
	}
}

// startAgentSandboxController runs the upstream controller against the
// test apiserver until the test ends.
func startAgentSandboxController(t *testing.T) (logPath string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin, err := kubetest.Binary(ctx, "agent-sandbox-controller")
	if err != nil {
		t.Fatal(err)
	}
	logPath = filepath.Join(t.TempDir(), "agent-sandbox-controller.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig", env.Kubeconfig, "--leader-elect=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("agent-sandbox-controller log (tail):\n%s", b)
		}
	})
	return logPath
}

// agentSandbox is a v1beta1 Sandbox whose Pod template is what the
// operator's mutator would leave: the sandboxd template annotation, the
// runtime nodeSelector and the provider toleration, bound to the node.
func agentSandbox(ns, name, node string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"podTemplate": map[string]any{
				"metadata": map[string]any{"annotations": map[string]any{kube.AnnTemplate: "default"}},
				"spec": map[string]any{
					"nodeName":      node,
					"restartPolicy": "Never",
					"nodeSelector":  map[string]any{kube.LabelRuntime: kube.RuntimeSandboxd},
					"tolerations": []any{map[string]any{
						"key": kube.TaintKey, "operator": "Exists", "effect": "NoSchedule",
					}},
					"containers": []any{map[string]any{"name": "agent", "image": "sandbox:latest"}},
				},
			},
		},
	}}
}

func sandboxReady(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// deleteControlledPod deletes p at once and waits until that generation is
// gone. Unlike deletePod it accepts a same-name successor: the controller
// may recreate the Pod before a GET ever sees the name free.
func deleteControlledPod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	cs, _ := clients(t)
	zero := int64(0)
	if err := cs.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}}); err != nil {
		t.Fatalf("delete pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	testkit.WaitForCtx(t, waitFor, "pod "+p.Namespace+"/"+p.Name+" uid "+string(p.UID)+" gone", func(ctx context.Context) (bool, error) {
		q, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		return err != nil || q.UID != p.UID, nil
	})
}

func TestInteropAgentSandboxController(t *testing.T) {
	t0 := time.Now()
	step := func(what string) { t.Logf("%6.2fs %s", time.Since(t0).Seconds(), what) }
	installAgentSandboxCRDs(t)
	n := startNode(t, sim.Config{})
	startAgentSandboxController(t)
	step("CRDs installed, node Ready, controller started")
	ns := newNamespace(t)
	_, dyn := clients(t)
	ctx := context.Background()

	if _, err := dyn.Resource(sandboxV1beta1GVR).Namespace(ns).Create(ctx, agentSandbox(ns, "agent", n.Name), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Sandbox: %v", err)
	}
	first := waitRunning(t, ns, "agent")
	step("first Pod Running")
	ctrlRef := metav1.GetControllerOf(first)
	if ctrlRef == nil || ctrlRef.Kind != "Sandbox" || ctrlRef.APIVersion != "agents.x-k8s.io/v1beta1" || ctrlRef.Name != "agent" {
		t.Fatalf("the controller's Pod has controller owner %+v", ctrlRef)
	}
	id := first.Annotations[kube.AnnClaimID]
	// owner_addr is the node's sandboxd address, the same for every claim.
	host, _, _ := net.SplitHostPort(n.Sim.OwnerAddr())
	if first.Status.PodIP != host {
		t.Fatalf("podIP %q, want the VM address %q", first.Status.PodIP, host)
	}
	var sb *unstructured.Unstructured
	t.Cleanup(func() {
		if t.Failed() && sb != nil {
			st, _, _ := unstructured.NestedMap(sb.Object, "status")
			t.Logf("last Sandbox status seen: %v", st)
		}
	})
	testkit.WaitForCtx(t, waitFor, "Sandbox Ready (as agent-sandbox-controller reports it)", func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(sandboxV1beta1GVR).Namespace(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err == nil {
			sb = got
		}
		return err == nil && sandboxReady(got), nil
	})
	if ips, _, _ := unstructured.NestedStringSlice(sb.Object, "status", "podIPs"); len(ips) != 1 || ips[0] != host {
		t.Errorf("Sandbox status.podIPs = %v, want [%s]", ips, host)
	}

	// The Pod alone goes (an eviction, a drain): the owner is alive, so the
	// VM is kept; the controller recreates the Pod and it adopts it. The
	// controller recreates at once, so virtual-kubelet may see the delete
	// and the create as one sync and hand the new Pod over as an update:
	// then no delete decision is taken, and the adoption is the only trace.
	step("Sandbox Ready")
	deleteControlledPod(t, first)
	testkit.WaitForCtx(t, waitFor, "the recreated Pod adopts the claim", func(testingCtx) (bool, error) {
		return containsLine(n.vk.Log(), "adopted claim in place", ns+"/agent"), nil
	})
	second := waitPod(t, ns, "agent", "recreated and Running", func(p *corev1.Pod) bool { return p.UID != first.UID && isRunning(p) })
	if second.Annotations[kube.AnnClaimID] != id || second.Status.PodIP != host {
		t.Fatalf("recreated Pod has claim %s at %s, want the same VM %s at %s", second.Annotations[kube.AnnClaimID], second.Status.PodIP, id, host)
	}
	step("recreated Pod Running")
	if c, r := n.counter("claim_ok"), n.counter("release"); c != 1 || r != 0 {
		t.Fatalf("claims = %d, releases = %d; want exactly 1 claim and no release", c, r)
	}
	testkit.WaitForCtx(t, waitFor, "Sandbox Ready again", func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(sandboxV1beta1GVR).Namespace(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err == nil {
			sb = got
		}
		return err == nil && sandboxReady(got), nil
	})

	step("Sandbox Ready again")
	// The Sandbox goes: its Pod follows and the VM is released, once. This
	// control plane runs no garbage collector, so the test deletes the
	// dependent Pod as the GC's background propagation would.
	if err := dyn.Resource(sandboxV1beta1GVR).Namespace(ns).Delete(ctx, "agent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitForCtx(t, waitFor, "Sandbox gone", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(sandboxV1beta1GVR).Namespace(ns).Get(ctx, "agent", metav1.GetOptions{})
		return err != nil, nil
	})
	step("Sandbox gone")
	deletePod(t, ns, "agent")
	waitReleases(t, n, 1)
	step("released")
	if len(n.live()) != 0 {
		t.Fatalf("emulator still holds %v", n.live())
	}
	if c := n.counter("claim_ok"); c != 1 {
		t.Fatalf("claims = %d, want 1", c)
	}
}
