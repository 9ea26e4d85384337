package e2e

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

const exampleSandbox = "../examples/sandbox.yaml"

// TestInstallExampleSandboxRuns takes examples/sandbox.yaml as a user would
// apply it (docs/install.md, "Verify"). The file must be a Sandbox the real
// agent-sandbox CRD accepts with strict field validation (a server-side
// dry run first, so a typo in a field is an error, not a pruned field),
// its Pod template must be a claim the provider accepts, and its
// nodeSelector and toleration must fit the Node vk-sandbox registers. Then
// it runs: the real agent-sandbox controller makes the Pod, the test binds
// it to the virtual node as the scheduler would (the suite runs no
// scheduler), and the Pod goes Running on a VM.
func TestInstallExampleSandboxRuns(t *testing.T) {
	ctx := context.Background()
	installAgentSandboxCRDs(t)
	n := startNode(t, sim.Config{})
	startAgentSandboxController(t)
	cs, dyn := clients(t)
	ns := newNamespace(t)

	b, err := os.ReadFile(exampleSandbox)
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := utilyaml.Unmarshal(b, &obj); err != nil {
		t.Fatalf("%s: %v", exampleSandbox, err)
	}
	sb := &unstructured.Unstructured{Object: obj}
	if gvk := sb.GroupVersionKind(); gvk.Group != sandboxV1beta1GVR.Group || gvk.Version != sandboxV1beta1GVR.Version || gvk.Kind != "Sandbox" {
		t.Fatalf("%s is a %s, want an agents.x-k8s.io/v1beta1 Sandbox", exampleSandbox, gvk)
	}
	sb.SetNamespace(ns)

	// The Pod template, as the provider and the scheduler read it.
	tmplMeta, _, _ := unstructured.NestedStringMap(sb.Object, "spec", "podTemplate", "metadata", "annotations")
	if _, err := kube.ParseClaimSpec(pipeline.JoinKey(ns, sb.GetName()), tmplMeta); err != nil {
		t.Errorf("the example's annotations are refused: %v", err)
	}
	rawSpec, _, _ := unstructured.NestedMap(sb.Object, "spec", "podTemplate", "spec")
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rawSpec, &spec); err != nil {
		t.Fatalf("the example's Pod spec: %v", err)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSchedulable(t, "the example's Pod template", spec, node)

	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	dry := opts
	dry.DryRun = []string{metav1.DryRunAll}
	if _, err := dyn.Resource(sandboxV1beta1GVR).Namespace(ns).Create(ctx, sb, dry); err != nil {
		t.Fatalf("server-side dry run of %s: %v", exampleSandbox, err)
	}
	if _, err := dyn.Resource(sandboxV1beta1GVR).Namespace(ns).Create(ctx, sb, opts); err != nil {
		t.Fatalf("create %s: %v", exampleSandbox, err)
	}

	// The controller's Pod, unscheduled: bind it where the scheduler would.
	var pod *corev1.Pod
	testkit.WaitForCtx(t, waitFor, "the Sandbox controller's Pod "+ns+"/"+sb.GetName(), func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, sb.GetName(), metav1.GetOptions{})
		pod = p
		return err == nil, nil
	})
	checkSchedulable(t, "the controller's Pod", pod.Spec, node)
	if err := cs.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.Name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind %s/%s to %s: %v", ns, pod.Name, n.Name, err)
	}
	running := waitRunning(t, ns, sb.GetName())
	if running.Annotations[kube.AnnClaimID] == "" || running.Status.PodIP == "" {
		t.Errorf("Running without a claim id (%q) or a Pod IP (%q)", running.Annotations[kube.AnnClaimID], running.Status.PodIP)
	}
}

// checkSchedulable fails unless spec may run on node as the scheduler sees
// it: every nodeSelector entry is a node label, and every NoSchedule or
// NoExecute taint of the node is tolerated.
func checkSchedulable(t *testing.T, what string, spec corev1.PodSpec, node *corev1.Node) {
	t.Helper()
	if len(spec.NodeSelector) == 0 {
		t.Errorf("%s has no nodeSelector: it could land on any node", what)
	}
	for k, v := range spec.NodeSelector {
		if node.Labels[k] != v {
			t.Errorf("%s selects %s=%s; node %s has %s=%q", what, k, v, node.Name, k, node.Labels[k])
		}
	}
	checked := 0
	for _, taint := range node.Spec.Taints {
		// node.kubernetes.io/not-ready and the like are the node lifecycle
		// controller's, lifted once the node is Ready; this control plane
		// runs no controller manager to lift them.
		if taint.Effect == corev1.TaintEffectPreferNoSchedule || strings.HasPrefix(taint.Key, "node.kubernetes.io/") {
			continue
		}
		checked++
		tolerated := false
		for _, tol := range spec.Tolerations {
			tolerated = tolerated || tolerates(tol, taint)
		}
		if !tolerated {
			t.Errorf("%s does not tolerate node %s's taint %s", what, node.Name, taint.ToString())
		}
	}
	if checked == 0 {
		t.Errorf("node %s has no taint of its own (want %s)", node.Name, kube.TaintKey)
	}
}

// tolerates is the scheduler's rule for the Equal and Exists operators.
func tolerates(tol corev1.Toleration, taint corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != taint.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != taint.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return tol.Key != "" && tol.Value == taint.Value
	}
	return false
}
