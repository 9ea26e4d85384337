// Command vk-sandbox-demo runs the whole product locally on its embedded
// defaults: a real etcd and kube-apiserver (built from the Go module proxy
// on first use), the sandboxd emulator, and the vk-sandbox binary. It then
// walks through the Pod contract: claim → Running with the VM IP; a delete
// with the owner alive preserves the VM and a same-name Pod adopts it; the
// owner deleted releases it. Run it with `make demo`.
//
// With -observability (`make demo-observability`) it also starts a real
// Jaeger v2 that receives the traces of vk-sandbox and of the emulator,
// and a real Prometheus scraping vk-sandbox when one is installed; the
// first claim meets one injected sandboxd 500, so its trace shows a
// retry. At the end it prints the URLs to open.
package main

import (
	"context"
	"flag"
	"fmt"
	"golang.org/x/term"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

const (
	ns       = "default"
	nodeName = "vk-sandboxd-demo"
	token    = "demo-root-token-0123456789abcdef"
)

var sandboxGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1alpha1", Resource: "sandboxes"}

func main() {
	hold := flag.Bool("hold", isTerminal(os.Stdin), "keep everything running after the walkthrough until Ctrl-C (default: when stdin is a terminal)")
	withObs := flag.Bool("observability", false, "also run Jaeger (and Prometheus, if installed) and send the traces there")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *hold, *withObs); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func step(format string, a ...any) { fmt.Printf("\n==> "+format+"\n", a...) }

func run(ctx context.Context, hold, withObs bool) error {
	dir, err := os.MkdirTemp("", "vk-sandbox-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	step("starting etcd and kube-apiserver (the first run builds them from the Go module proxy: ~8 minutes)")
	env, err := kubetest.Start(ctx, kubetest.Options{Dir: filepath.Join(dir, "cluster"), Logf: func(f string, a ...any) { fmt.Printf("    "+f+"\n", a...) }})
	if err != nil {
		return err
	}
	defer env.Stop()
	fmt.Printf("    export KUBECONFIG=%s\n", env.Kubeconfig)
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if err := env.InstallCRDs(ctx, filepath.Join(root, "manifests/test/sandbox-owner-crd.yaml")); err != nil {
		return err
	}

	var obs *observability
	if withObs {
		if obs, err = startJaeger(ctx, dir); err != nil {
			return err
		}
		defer obs.stop()
	}

	step("starting the sandboxd emulator (warm pool 'default', 0.5ms claims)")
	simCfg := sim.Config{RootToken: token, Pools: map[pool.Key]int{{Template: "default"}: 8}, ClaimLatency: 500 * time.Microsecond}
	if obs != nil {
		simCfg.TracerProvider = obs.simTP
	}
	s, err := sim.New(simCfg)
	if err != nil {
		return err
	}
	defer s.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(l, s.Handler()) }()
	sandboxdURL := "http://" + l.Addr().String()
	fmt.Printf("    sandboxd at %s\n", sandboxdURL)

	step("building and starting vk-sandbox")
	bin := filepath.Join(dir, "vk-sandbox")
	if err := kubetest.BuildVKSandbox(ctx, bin, false); err != nil {
		return err
	}
	metricsPort, err := kubetest.FreePort()
	if err != nil {
		return err
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(metricsPort)
	vk, err := kubetest.NewVKSandbox(kubetest.VKSandboxOptions{
		Bin: bin, Dir: dir, Node: nodeName, Kubeconfig: env.Kubeconfig,
		SandboxdURL: sandboxdURL, Token: token, MetricsAddr: metricsAddr, Env: obs.env(),
	})
	if err != nil {
		return err
	}
	if err := vk.Start(); err != nil {
		return err
	}
	defer func() { _ = vk.Terminate() }()
	fmt.Printf("    logs: %s   metrics: http://%s/metrics\n", vk.LogPath(), metricsAddr)
	if err := obs.startPrometheus(ctx, dir, metricsAddr); err != nil {
		return err
	}

	cs := env.Clientset()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, "node "+nodeName+" Ready", func(ctx context.Context) bool {
		return kubetest.NodeReady(ctx, cs, nodeName)
	}); err != nil {
		return err
	}

	step("creating Sandbox 'demo' and its Pod")
	owner, err := dyn.Resource(sandboxGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1alpha1", "kind": "Sandbox", "metadata": map[string]any{"name": "demo"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if obs != nil {
		fmt.Printf("    (sandboxd answers the first claim 500 once, so its trace shows the retry)\n")
		s.InjectFault(sim.Fault{Verb: pool.VerbClaim, Mode: "500", Count: 1})
	}
	first, err := createAndWait(ctx, cs, owner)
	if err != nil {
		return err
	}
	fmt.Printf("    pod demo Running: podIP=%s claim=%s (claims at sandboxd: %d)\n",
		first.Status.PodIP, first.Annotations[kube.AnnClaimID], s.Counters()["claim_ok"])

	step("deleting only the Pod while its Sandbox lives (as an eviction would)")
	if err := deletePod(ctx, cs); err != nil {
		return err
	}
	fmt.Printf("    releases at sandboxd: %d — the VM is preserved\n", s.Counters()["release"])

	step("a same-name replacement Pod adopts the same VM")
	second, err := createAndWait(ctx, cs, owner)
	if err != nil {
		return err
	}
	fmt.Printf("    pod demo Running again: podIP=%s claim=%s (claims at sandboxd: still %d)\n",
		second.Status.PodIP, second.Annotations[kube.AnnClaimID], s.Counters()["claim_ok"])

	step("deleting the Sandbox: the owner is gone, so the VM is released")
	if err := dyn.Resource(sandboxGVR).Namespace(ns).Delete(ctx, "demo", metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := deletePod(ctx, cs); err != nil {
		return err
	}
	if err := waitFor(ctx, "the release", func(context.Context) bool { return s.Counters()["release_ok"] == 1 }); err != nil {
		return err
	}
	fmt.Printf("    releases at sandboxd: %d, sandboxes left: %d\n", s.Counters()["release_ok"], len(s.Sandboxes()))

	if err := obs.report(ctx, string(first.UID)); err != nil {
		return err
	}
	fmt.Printf("\nDemo complete.\n")
	if hold {
		fmt.Printf("Everything is still running. Try:\n  export KUBECONFIG=%s\n  kubectl get nodes,pods -o wide\nCtrl-C to stop.\n", env.Kubeconfig)
		<-ctx.Done()
	}
	return nil
}

func createAndWait(ctx context.Context, cs kubernetes.Interface, owner *unstructured.Unstructured) (*corev1.Pod, error) {
	yes := true
	pod := kubetest.SandboxPod(ns, "demo", nodeName)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), Controller: &yes}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	var got *corev1.Pod
	err := waitFor(ctx, "pod demo Running", func(ctx context.Context) bool {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "demo", metav1.GetOptions{})
		got = p
		return err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
	})
	return got, err
}

func deletePod(ctx context.Context, cs kubernetes.Interface) error {
	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "demo", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return err
	}
	return waitFor(ctx, "pod demo gone", func(ctx context.Context) bool {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "demo", metav1.GetOptions{})
		return err != nil
	})
}

func waitFor(ctx context.Context, what string, cond func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) { return cond(ctx), nil }); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("run the demo inside the vk-sandbox checkout (no go.mod above %s)", dir)
		}
	}
}

// isTerminal asks the tty layer. A character-device check is not enough:
// /dev/null is a character device too, and `make demo </dev/null` from a
// script would then hold forever.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
