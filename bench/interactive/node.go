package main

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/agent"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

const (
	rootToken = "interactive-root-token-0123456789ab"
	// guestPort is the Pod port forwarded to; the emulator maps it to a
	// loopback echo service standing in for one inside the VM.
	guestPort = 8080
	podName   = "box"
)

// node is the system under test: the emulator (sandboxd and the guest's
// silkd), a guest echo service, and one vk-sandbox process whose kubelet
// API the apiserver proxies exec and port-forward to; ns/box is its one
// Running sandbox Pod.
type node struct {
	sim  *sim.Server
	srv  *httptest.Server
	echo net.Listener
	vk   *kubetest.VKSandbox
	ns   string
	// direct reaches box's VM (sandbox, token included) straight at the
	// emulator, for the part of a round trip that is sandboxd's and the
	// guest's own.
	direct  *pool.Client
	sandbox pool.Sandbox
}

// startNode starts it all and returns once ns/box is Running.
func startNode(ctx context.Context, env *kubetest.Env, bin, dir string) (*node, error) {
	n := &node{}
	var err error
	if n.echo, err = serveEcho(); err != nil {
		return nil, err
	}
	if n.sim, err = sim.New(sim.Config{
		RootToken: rootToken, Pools: map[pool.Key]int{{Template: "default"}: 4},
		GuestPorts: map[int]string{guestPort: n.echo.Addr().String()},
	}); err != nil {
		n.echo.Close()
		return nil, err
	}
	n.srv = httptest.NewServer(n.sim.Handler())
	fail := func(err error) (*node, error) { n.stop(); return nil, err }
	name := fmt.Sprintf("interactive-%d", os.Getpid())
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		return fail(err)
	}
	// The apiserver dials the kubelet API at the node's InternalIP: the
	// loopback address of kubetest's --listen-addr. Exec and port-forward
	// accept a loopback node (only nodes/proxy refuses one).
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if n.vk, err = kubetest.StartVKSandbox(rctx, env.Clientset(), kubetest.VKSandboxOptions{
		Bin: bin, Dir: filepath.Join(dir, name), Node: name, Kubeconfig: env.Kubeconfig,
		SandboxdURL: n.srv.URL, Token: rootToken,
		Args: []string{"--node-ip", "127.0.0.1", "--client-ca-file", env.KubeletClientCA,
			"--orphan-scan-interval", "0", "--log-level", "warn"},
	}); err != nil {
		return fail(err)
	}
	cs := env.Clientset()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "interactive-"}}, metav1.CreateOptions{})
	if err != nil {
		return fail(err)
	}
	n.ns = ns.Name
	if _, err := cs.CoreV1().Pods(n.ns).Create(ctx, kubetest.SandboxPod(n.ns, podName, name), metav1.CreateOptions{}); err != nil {
		return fail(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(n.ns).Get(ctx, podName, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		return fail(fmt.Errorf("pod %s/%s not Running: %w; vk-sandbox log tail:\n%s", n.ns, podName, err, n.vk.Tail(20)))
	}
	for _, sb := range n.sim.Sandboxes() {
		// vk-sandbox/<node>/<namespace>/<name>/<mark>: the mark is the
		// node's HMAC, which only the node knows.
		if strings.HasPrefix(sb.ClaimRef, "vk-sandbox/"+name+"/"+n.ns+"/"+podName+"/") {
			n.sandbox = sb
		}
	}
	if n.sandbox.ID == "" {
		return fail(fmt.Errorf("no VM claimed for %s/%s", n.ns, podName))
	}
	if n.direct, err = pool.NewClient(pool.ClientOptions{BaseURL: n.srv.URL, Token: rootToken}); err != nil {
		return fail(err)
	}
	return n, nil
}

// counters are the emulator's request counters.
func (n *node) counters() map[string]int64 { return n.sim.Counters() }

func (n *node) stop() {
	if n.vk != nil {
		if err := n.vk.Terminate(); err != nil {
			logf("vk-sandbox exit: %v; log tail:\n%s", err, n.vk.Tail(20))
		}
	}
	if n.direct != nil {
		n.direct.CloseIdleConnections()
	}
	if n.srv != nil {
		n.srv.Close()
	}
	if n.sim != nil {
		_ = n.sim.Close()
	}
	n.echo.Close()
}

// serveEcho is the guest's echo service (testkit.Echo on each connection):
// the listener closes it.
func serveEcho() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				testkit.Echo(c.(*net.TCPConn))
			}()
		}
	}()
	return ln, nil
}

// directExecTrue is exec true through the emulator's agent relay and
// silkd alone: no apiserver, no kubelet API.
func (n *node) directExecTrue(ctx context.Context) error {
	ag := agent.New(n.direct, 0).Agent(n.sandbox.ID, n.sandbox.Token)
	defer ag.Close()
	code, err := ag.Exec(ctx, agent.Exec{Argv: []string{"true"}})
	if err == nil && code != 0 {
		err = fmt.Errorf("true exited %d", code)
	}
	return err
}

// directEcho is a new connection to the guest's echo through the
// emulator's port relay alone, with ping echoed.
func (n *node) directEcho(ctx context.Context) error {
	conn, err := n.direct.DialPort(ctx, n.sandbox.ID, n.sandbox.Token, guestPort)
	if err != nil {
		return err
	}
	defer conn.Close()
	return pingPong(conn, conn)
}
