package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

const (
	rootToken = "e2e-root-token-0123456789abcdef"
	waitFor   = 90 * time.Second // generous for 2 loaded CI cores; a pass takes far less
)

var (
	sandboxGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1alpha1", Resource: "sandboxes"}
	nodeSeq    atomic.Int64
)

func clients(t *testing.T) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return env.Clientset(), dyn
}

// vkNode is one virtual node: an emulator plus a vk-sandbox process.
type vkNode struct {
	t     *testing.T
	Name  string
	Sim   *sim.Server
	srv   *simtest.Emulator
	state string // the state file the test reads: vk's, or the --state-path a test gave
	vk    *kubetest.VKSandbox
}

// startNode starts an emulator and vk-sandbox, and waits for the node to be
// Ready in the apiserver.
func startNode(t *testing.T, simCfg sim.Config, extraArgs ...string) *vkNode {
	t.Helper()
	return startNodeEnv(t, simCfg, nil, extraArgs...)
}

// startNodeEnv is startNode with extra environment variables.
func startNodeEnv(t *testing.T, simCfg sim.Config, environ []string, extraArgs ...string) *vkNode {
	t.Helper()
	return startNodeAs(t, simCfg, rootToken, environ, extraArgs...)
}

// startNodeAs is startNodeEnv with vk-sandbox holding token (a tenant
// token of simCfg, say) instead of the root token.
func startNodeAs(t *testing.T, simCfg sim.Config, token string, environ []string, extraArgs ...string) *vkNode {
	t.Helper()
	simCfg.RootToken = rootToken
	if simCfg.Pools == nil {
		simCfg.Pools = map[pool.Key]int{{Template: "default"}: 16}
	}
	n := launchNode(t, simtest.Start(t, simCfg), token, environ, extraArgs)
	n.waitReady()
	return n
}

// launchNode starts vk-sandbox against the emulator srv, with its own
// state file and token file, and stops it at the end of the test, before
// the emulator stops.
func launchNode(t *testing.T, srv *simtest.Emulator, token string, environ, extraArgs []string) *vkNode {
	t.Helper()
	name := fmt.Sprintf("vk-e2e-%d-%d", os.Getpid(), nodeSeq.Add(1))
	vk, err := kubetest.NewVKSandbox(kubetest.VKSandboxOptions{
		Bin: vkBin, Dir: t.TempDir(), Node: name, Kubeconfig: env.Kubeconfig,
		SandboxdURL: srv.URL, Token: token, Env: environ,
		Args: append([]string{"--requeue-max", "2s", "--orphan-scan-interval", "0", "--log-level", "debug"}, extraArgs...),
	})
	if err != nil {
		t.Fatal(err)
	}
	n := &vkNode{t: t, Name: name, Sim: srv.Sim, srv: srv, state: vk.StatePath, vk: vk}
	t.Cleanup(func() {
		n.stop()
		n.checkRaces()
		if t.Failed() {
			n.dumpLog()
		}
	})
	n.start()
	return n
}

func (n *vkNode) start() {
	n.t.Helper()
	if err := n.vk.Start(); err != nil {
		n.t.Fatal(err)
	}
}

func (n *vkNode) stop() { _ = n.vk.Terminate() }

// restart stops vk-sandbox gracefully (it must exit 0) and starts it again.
func (n *vkNode) restart() {
	n.t.Helper()
	if err := n.vk.Terminate(); err != nil {
		n.t.Fatalf("graceful shutdown: %v", err)
	}
	n.start()
	n.waitReady()
}

func (n *vkNode) dumpLog() {
	for i, path := range n.vk.LogPaths() {
		b, _ := os.ReadFile(path)
		lines := strings.Split(string(b), "\n")
		if len(lines) > 80 {
			lines = lines[len(lines)-80:]
		}
		n.t.Logf("vk-sandbox log (start %d, tail):\n%s", i+1, strings.Join(lines, "\n"))
	}
}

// checkRaces fails the test if a race-built vk-sandbox reported a data race
// in any of its runs.
func (n *vkNode) checkRaces() {
	for i, path := range n.vk.LogPaths() {
		b, _ := os.ReadFile(path)
		if at := bytes.Index(b, []byte("WARNING: DATA RACE")); at >= 0 {
			end := min(len(b), at+4000)
			n.t.Errorf("vk-sandbox (start %d) reported a data race:\n%s", i+1, b[at:end])
		}
	}
}

func (n *vkNode) waitReady() {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), waitFor)
	defer cancel()
	// The pod controller is up once the readiness callback ran; the node is
	// marked Ready only after that.
	if err := n.vk.WaitReady(ctx, env.Clientset()); err != nil {
		n.t.Fatal(err)
	}
}

func (n *vkNode) counter(name string) int64 { return n.Sim.Counters()[name] }

func (n *vkNode) live() []pool.Sandbox { return n.Sim.Sandboxes() }

func freePort(t *testing.T) int {
	t.Helper()
	port, err := kubetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func newNamespace(t *testing.T) string {
	t.Helper()
	cs, _ := clients(t)
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// sandboxPod is a Pod as the operator's mutator leaves it, bound straight
// to the virtual node (no scheduler in this suite).
func sandboxPod(ns, name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := kubetest.SandboxPod(ns, name, node)
	for _, m := range mutate {
		m(p)
	}
	return p
}

func createPod(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	cs, _ := clients(t)
	out, err := cs.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	return out
}

// deletePod deletes at once (grace 0), as an eviction's force path does.
func deletePod(t *testing.T, ns, name string) {
	t.Helper()
	cs, _ := clients(t)
	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
	testkit.WaitForCtx(t, waitFor, "pod "+ns+"/"+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err != nil, nil
	})
}

func waitPod(t *testing.T, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	cs, _ := clients(t)
	var last *corev1.Pod
	testkit.WaitForCtx(t, waitFor, fmt.Sprintf("pod %s/%s %s", ns, name, what), func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	return last
}

func isRunning(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
}

func waitRunning(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	return waitPod(t, ns, name, "Running", isRunning)
}

// createOwner makes a Sandbox CR to own Pods.
func createOwner(t *testing.T, ns, name string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	_, dyn := clients(t)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1alpha1", "kind": "Sandbox",
		"metadata": map[string]any{"name": name, "namespace": ns},
	}}
	if len(finalizers) > 0 {
		u.SetFinalizers(finalizers)
	}
	out, err := dyn.Resource(sandboxGVR).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create owner: %v", err)
	}
	return out
}

func deleteOwner(t *testing.T, ns, name string) {
	t.Helper()
	_, dyn := clients(t)
	if err := dyn.Resource(sandboxGVR).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete owner: %v", err)
	}
}

func ownedBy(o *unstructured.Unstructured) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID(), Controller: &yes,
		}}
	}
}

func annotate(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations[k] = v }
}

func events(t *testing.T, ns, pod, reason string) []corev1.Event {
	t.Helper()
	cs, _ := clients(t)
	l, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range l.Items {
		if e.InvolvedObject.Name == pod && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// stateFileHolds reports whether the state file on disk mentions a claim id.
func (n *vkNode) stateFileHolds(id string) bool {
	b, err := os.ReadFile(n.state)
	return err == nil && bytes.Contains(b, []byte(id))
}

// podKeyOf is the Pod key a VM was claimed for: the namespace and name
// segments of its claim_ref
// ("vk-sandbox/<node>/<namespace>/<name>/<pod-uid>/<mark>"). It reads the
// form and checks no mark (see vkNode.identity for that).
func podKeyOf(s pool.Sandbox) string {
	parts := strings.Split(s.ClaimRef, "/")
	if len(parts) != 6 {
		return s.ClaimRef
	}
	return parts[2] + "/" + parts[3]
}

// identity is how the node marks its claims: its name and the node key it
// made beside its state file at its first start.
func (n *vkNode) identity(t *testing.T) pipeline.Identity {
	t.Helper()
	key, err := store.ReadNodeKey(n.state)
	if err != nil {
		t.Fatalf("node %s: %v", n.Name, err)
	}
	return pipeline.Identity{Node: n.Name, Key: key}
}

// claimRefOf is id's claim_ref for the Pod generation (key, uid).
func claimRefOf(t *testing.T, id pipeline.Identity, key pipeline.PodKey, uid string) string {
	t.Helper()
	ref, err := id.ClaimRef(key, uid)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// runThenOrphan runs a Pod owned by a new Sandbox until it is Running, then
// deletes the owner and then the Pod: a delete that must release the VM.
func runThenOrphan(t *testing.T, n *vkNode, ns, name string) {
	t.Helper()
	owner := createOwner(t, ns, name)
	createPod(t, sandboxPod(ns, name, n.Name, ownedBy(owner)))
	waitRunning(t, ns, name)
	deleteOwner(t, ns, name)
	deletePod(t, ns, name)
}
