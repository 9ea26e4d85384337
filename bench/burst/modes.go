package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/kube/kubetest"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

const (
	modeBare     = "bare"
	modeProvider = "provider"
	modeDefault  = "provider-default-limiters"
	rootToken    = "burst-root-token-0123456789abcdef"
)

// createAll creates n Pods with a bounded pool of workers. Each created Pod
// is handed to then (if not nil) from the worker that created it.
func createAll(ctx context.Context, cs kubernetes.Interface, t *tracker, workers int, pods []*corev1.Pod, then func(*corev1.Pod)) {
	next := make(chan *corev1.Pod)
	var wg sync.WaitGroup
	for range min(workers, len(pods)) {
		wg.Go(func() {
			for p := range next {
				t.createStarted(p.Name, time.Now())
				out, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
				if err != nil {
					t.fail(fmt.Errorf("create %s: %w", p.Name, err))
					continue
				}
				t.createAcked(p.Name, time.Now())
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

func podNames(ns, node string, n int) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = kubetest.SandboxPod(ns, fmt.Sprintf("p-%05d", i), node)
	}
	return out
}

// fakeRunning is close to what the provider renders for a claimed Pod
// (kube.runningStatus), so both modes write objects of about the same size.
func fakeRunning(p *corev1.Pod, i int) corev1.PodStatus {
	ip := fmt.Sprintf("10.77.%d.%d", i/250, 1+i%250)
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

// runBare is the apiserver's own limit: N creates and N status updates to
// Running from this process, same create pool, plus a status pool of the
// same size, on a node that does not exist and with no provider.
func runBare(ctx context.Context, cs kubernetes.Interface, ns string, n, workers int, t *tracker) {
	pods := podNames(ns, "burst-bare-nonode", n)
	created := make(chan *corev1.Pod, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p := range created {
				i, _ := strconv.Atoi(strings.TrimPrefix(p.Name, "p-"))
				p.Status = fakeRunning(p, i)
				if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
					t.fail(fmt.Errorf("update status %s: %w", p.Name, err))
					continue
				}
				t.statusAcked(p.Name, time.Now())
			}
		})
	}
	createAll(ctx, cs, t, workers, pods, func(p *corev1.Pod) { created <- p })
	close(created)
	wg.Wait()
}

// vkNode is one emulator plus one vk-sandbox process (kubetest.VKSandbox).
type vkNode struct {
	sim      *sim.Server
	srv      *httptest.Server
	vk       *kubetest.VKSandbox
	metrics  string // host:port, or "" when not exposed
	log      string // vk-sandbox's log file
	stopOnce sync.Once
	exitErr  error
}

type nodeOpts struct {
	bin, kubeconfig, dir, name string
	n                          int
	claimLatency               time.Duration
	defaultLimiters, metrics   bool
	extraArgs                  []string
}

// startVK starts the emulator and vk-sandbox, and waits for the node to be
// Ready: readiness is a precondition of the run, not part of the
// measurement.
func startVK(ctx context.Context, cs kubernetes.Interface, o nodeOpts) (*vkNode, error) {
	s, err := sim.New(sim.Config{
		RootToken: rootToken, Pools: map[pool.Key]int{{Template: "default"}: o.n + 64},
		ClaimLatency: o.claimLatency, MaxClaims: 0,
	})
	if err != nil {
		return nil, err
	}
	v := &vkNode{sim: s, srv: httptest.NewServer(s.Handler())}
	fail := func(err error) (*vkNode, error) { v.stop(); return nil, err }
	vo := kubetest.VKSandboxOptions{
		Bin: o.bin, Dir: o.dir, Node: o.name, Kubeconfig: o.kubeconfig,
		SandboxdURL: v.srv.URL, Token: rootToken, Args: []string{"--log-level", "warn"},
	}
	if o.metrics {
		port, err := kubetest.FreePort()
		if err != nil {
			return fail(err)
		}
		vo.MetricsAddr = "127.0.0.1:" + strconv.Itoa(port)
	}
	if o.defaultLimiters {
		vo.Args = append(vo.Args, "--default-rate-limiters")
	}
	vo.Args = append(vo.Args, o.extraArgs...)
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if v.vk, err = kubetest.StartVKSandbox(rctx, cs, vo); err != nil {
		return fail(err)
	}
	v.metrics, v.log = v.vk.MetricsAddr, v.vk.LogPath()
	return v, nil
}

// stop terminates vk-sandbox, then closes the emulator, and returns
// vk-sandbox's exit error (nil: exit 0). Idempotent.
func (v *vkNode) stop() error {
	v.stopOnce.Do(func() {
		if v.vk != nil {
			v.exitErr = v.vk.Terminate()
		}
		v.srv.Close()
		_ = v.sim.Close()
	})
	return v.exitErr
}

// claimTimes maps claim_ref (namespace/name) to the emulator's claimed_at.
func (v *vkNode) claimTimes() map[string]time.Time {
	out := map[string]time.Time{}
	for _, sb := range v.sim.Sandboxes() {
		if sb.ClaimedAt != nil {
			out[sb.ClaimRef] = *sb.ClaimedAt
		}
	}
	return out
}

func (v *vkNode) scrape() (string, error) {
	if v.metrics == "" {
		return "", nil
	}
	resp, err := http.Get("http://" + v.metrics + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
