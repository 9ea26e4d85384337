package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// vkNode is one emulator plus one vk-sandbox process.
type vkNode struct {
	name     string
	sim      *sim.Server
	srv      *httptest.Server
	cmd      *exec.Cmd
	exited   chan error
	log      string
	metrics  string // host:port, or "" when not exposed
	stopOnce sync.Once
	exitErr  error
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type nodeOpts struct {
	bin, kubeconfig, dir, name string
	n                          int
	claimLatency               time.Duration
	defaultLimiters, metrics   bool
	extraArgs                  []string
}

func startVK(ctx context.Context, cs kubernetes.Interface, o nodeOpts) (*vkNode, error) {
	s, err := sim.New(sim.Config{
		RootToken: rootToken, Pools: map[pool.Key]int{{Template: "default"}: o.n + 64},
		ClaimLatency: o.claimLatency, MaxClaims: 0,
	})
	if err != nil {
		return nil, err
	}
	v := &vkNode{name: o.name, sim: s, srv: httptest.NewServer(s.Handler()), log: filepath.Join(o.dir, "vk-sandbox.log")}
	fail := func(err error) (*vkNode, error) { v.stop(); return nil, err }
	tokenFile := filepath.Join(o.dir, "token")
	if err := os.WriteFile(tokenFile, []byte(rootToken+"\n"), 0o600); err != nil {
		return fail(err)
	}
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	if o.metrics {
		mp, err := freePort()
		if err != nil {
			return fail(err)
		}
		v.metrics = "127.0.0.1:" + strconv.Itoa(mp)
	}
	args := []string{
		"--node-name", o.name, "--kubeconfig", o.kubeconfig,
		"--listen-addr", "127.0.0.1:" + strconv.Itoa(port), "--metrics-addr", v.metrics,
		"--sandboxd-url", v.srv.URL, "--sandboxd-token-file", tokenFile,
		"--state-path", filepath.Join(o.dir, "state", "claims.json"),
		"--orphan-scan-interval", "0", "--log-level", "warn",
	}
	if o.defaultLimiters {
		args = append(args, "--default-rate-limiters")
	}
	args = append(args, o.extraArgs...)
	logf, err := os.Create(v.log)
	if err != nil {
		return fail(err)
	}
	v.cmd = exec.Command(o.bin, args...)
	v.cmd.Stdout, v.cmd.Stderr = logf, logf
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := v.cmd.Start(); err != nil {
		logf.Close()
		v.cmd = nil
		return fail(err)
	}
	v.exited = make(chan error, 1)
	go func() { v.exited <- v.cmd.Wait(); logf.Close() }()
	if err := v.waitReady(ctx, cs); err != nil {
		return fail(err)
	}
	return v, nil
}

// waitReady polls the Node object: readiness is a precondition of the run,
// not part of the measurement.
func (v *vkNode) waitReady(ctx context.Context, cs kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		if node, err := cs.CoreV1().Nodes().Get(ctx, v.name, metav1.GetOptions{}); err == nil {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case err := <-v.exited:
			v.exited <- err
			return fmt.Errorf("vk-sandbox exited before the node was Ready (%v); log tail:\n%s", err, tail(v.log, 20))
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready: %w; log tail:\n%s", v.name, ctx.Err(), tail(v.log, 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// terminate sends SIGTERM and returns the exit error (nil: exit 0).
func (v *vkNode) terminate() error {
	if v.cmd == nil {
		return nil
	}
	_ = v.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-v.exited:
		return err
	case <-time.After(60 * time.Second):
		_ = v.cmd.Process.Kill()
		<-v.exited
		return errors.New("vk-sandbox did not exit within 60s of SIGTERM")
	}
}

// stop terminates vk-sandbox, then closes the emulator. Idempotent.
func (v *vkNode) stop() error {
	v.stopOnce.Do(func() {
		v.exitErr = v.terminate()
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
