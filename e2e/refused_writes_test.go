package e2e

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// The node's user, as manifests/rbac.yaml makes it.
const nodeUser = "system:serviceaccount:vk-sandbox:vk-sandbox"

// A claimed Pod's Running status is pushed once, and a released Pod's
// final delete is sent once, so both must outlast an apiserver that
// refuses them: virtual-kubelet's own queues give up after 20 tries. Here
// a ValidatingAdmissionPolicy refuses the node's status writes, and later
// its deletes, well past 20 retries; once it is lifted the Pod goes
// Running, and later goes away.
func TestStatusWriteAndFinalDeleteOutlastRefusals(t *testing.T) {
	ctx := context.Background()
	cs, _ := clients(t)
	kubeconfig := shippedRoleKubeconfig(t, cs)
	margs, scrape := metricsArgs(t)
	// A retry cap of 100ms takes the queues past 20 tries in about 2 s.
	n := startNode(t, sim.Config{}, append(margs, "--kubeconfig", kubeconfig, "--requeue-max", "100ms")...)
	n.waitReady()
	ns := newNamespace(t)
	hold := newWriteHold(t, cs, ns)

	// Status writes refused: the claim is made, the Pod stays Pending.
	hold.refuse(admissionv1.Update, "pods/status")
	retries0 := queueRetries(t, scrape, "syncPodStatusFromProvider")
	createPod(t, sandboxPod(ns, "held", n.Name))
	testkit.WaitForCtx(t, waitFor, "more than 20 refused status writes", func(context.Context) (bool, error) {
		return queueRetries(t, scrape, "syncPodStatusFromProvider")-retries0 > 20, nil
	})
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, "held", metav1.GetOptions{}); err != nil || p.Status.Phase == corev1.PodRunning {
		t.Fatalf("the Pod went Running while its status writes were refused (%v)", err)
	}
	if c := n.counter("claim"); c != 1 {
		t.Fatalf("%d claims, want 1", c)
	}
	hold.lift()
	waitRunning(t, ns, "held")

	// The final delete refused: the user's delete is accepted, the node's
	// deletes (grace 0, once the VM is let go) are not: the provider's own
	// at once, then virtual-kubelet's after the grace period, retried.
	hold.refuse(admissionv1.Delete, "pods")
	retries0 = queueRetries(t, scrape, "deletePodsFromKubernetes")
	grace := int64(1)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "held", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitForCtx(t, waitFor, "more than 20 refused final deletes", func(context.Context) (bool, error) {
		return queueRetries(t, scrape, "deletePodsFromKubernetes")-retries0 > 20, nil
	})
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "held", metav1.GetOptions{}); err != nil {
		t.Fatalf("the Pod is gone while the node's deletes were refused: %v", err)
	}
	hold.lift()
	testkit.WaitForCtx(t, waitFor, "the Pod removed by the node", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "held", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// queueRetries is vksandbox_vk_queue_retries_total of one of
// virtual-kubelet's queues (0 before its first retry).
func queueRetries(t *testing.T, scrape, queue string) float64 {
	v, _ := metricSum(t, scrape, "vksandbox_vk_queue_retries_total", `queue="`+queue+`"`)
	return v
}

// writeHold refuses chosen writes of the node's user in one namespace,
// with a ValidatingAdmissionPolicy, until lifted.
type writeHold struct {
	t      *testing.T
	cs     kubernetes.Interface
	as     kubernetes.Interface // the admin client, impersonating the node
	ns     string
	policy string
	probe  *corev1.Pod // a Pod of no node, to try a write on (dry run)
}

func newWriteHold(t *testing.T, cs kubernetes.Interface, ns string) *writeHold {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: nodeUser}
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: "no-such-node", Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	if probe, err = cs.CoreV1().Pods(ns).Create(context.Background(), probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := &writeHold{t: t, cs: cs, as: as, ns: ns, policy: "hold-" + ns, probe: probe}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), h.policy, metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), h.policy, metav1.DeleteOptions{})
	})
	return h
}

// refuse replaces the hold with one on op of resource ("pods",
// "pods/status") and returns once the apiserver enforces it.
func (h *writeHold) refuse(op admissionv1.OperationType, resource string) {
	h.t.Helper()
	ctx := context.Background()
	adm := h.cs.AdmissionregistrationV1()
	_ = adm.ValidatingAdmissionPolicies().Delete(ctx, h.policy, metav1.DeleteOptions{})
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: h.policy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{op},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}},
				},
			}}},
			MatchConditions: []admissionv1.MatchCondition{{Name: "the-node", Expression: "request.userInfo.username == '" + nodeUser + "'"}},
			Validations:     []admissionv1.Validation{{Expression: "false", Message: "refused by the test"}},
		},
	}
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: h.policy},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        h.policy,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": h.ns}}},
		},
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	testkit.WaitForCtx(h.t, waitFor, "the hold enforced", func(ctx context.Context) (bool, error) {
		return h.try(ctx, op) != nil, nil
	})
}

// lift removes the hold and returns once the node's writes pass again.
func (h *writeHold) lift() {
	h.t.Helper()
	ctx := context.Background()
	if err := h.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, h.policy, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
	testkit.WaitForCtx(h.t, waitFor, "the hold lifted", func(ctx context.Context) (bool, error) {
		return h.try(ctx, admissionv1.Update) == nil && h.try(ctx, admissionv1.Delete) == nil, nil
	})
}

// try makes the held kind of write as the node, on the probe, as a dry run.
func (h *writeHold) try(ctx context.Context, op admissionv1.OperationType) error {
	dry := []string{metav1.DryRunAll}
	if op == admissionv1.Delete {
		return h.as.CoreV1().Pods(h.ns).Delete(ctx, h.probe.Name, metav1.DeleteOptions{DryRun: dry})
	}
	_, err := h.as.CoreV1().Pods(h.ns).UpdateStatus(ctx, h.probe, metav1.UpdateOptions{DryRun: dry})
	return err
}
