package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	//lint:ignore SA1019 client-go v0.37.2's portforward dialers still return this package's Dialer, a type distinct from k8s.io/streaming's
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// guestPort is the port the tests forward to; the emulator maps it to
// echoAddr, a loopback echo service standing in for one inside the VM.
const guestPort = 8080

// kubectlNode is a virtual node the apiserver can reach and that trusts the
// apiserver back: it registers an InternalIP and listens there (the
// apiserver dials the kubelet API at it), and verifies the apiserver's
// kubelet client certificate against the harness's CA. box is one Running
// sandbox Pod.
type kubectlNode struct {
	*vkNode
	ns, pod  string
	ip       string
	sandbox  pool.Sandbox // box's VM, token included
	echoAddr string
	direct   *pool.Client // straight to the emulator, for baselines
	base     map[string]int64
}

// counter is the emulator's verb counter since the node detected its
// sandboxd's features: Detect's probes (an exec and an agent relay of an
// unknown id) are not the test's requests.
func (k *kubectlNode) counter(name string) int64 { return k.vkNode.counter(name) - k.base[name] }

// proxyable reports whether the apiserver's node proxy (nodes/proxy: stats,
// metrics) may dial the node: it refuses loopback and link-local addresses,
// while exec, port-forward and logs go to any node address.
func (k *kubectlNode) proxyable() bool { return k.ip != "127.0.0.1" }

func startKubectlNode(t *testing.T) *kubectlNode {
	t.Helper()
	return startKubectlNodeWith(t, sim.Config{})
}

// startKubectlNodeWith is startKubectlNode on an emulator configured by
// cfg (its guest ports are set here), with extra vk-sandbox flags.
func startKubectlNodeWith(t *testing.T, cfg sim.Config, extraArgs ...string) *kubectlNode {
	t.Helper()
	echoAddr := testkit.EchoService(t)
	ip := hostIP()
	cfg.GuestPorts = map[int]string{guestPort: echoAddr}
	n := startNode(t, cfg, append([]string{
		"--node-ip", ip, "--listen-addr", net.JoinHostPort(ip, strconv.Itoa(freePort(t))), "--client-ca-file", env.KubeletClientCA}, extraArgs...)...)
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "box", n.Name))
	waitRunning(t, ns, "box")
	testkit.WaitForCtx(t, waitFor, "sandboxd's features detected", func(context.Context) (bool, error) {
		return containsLine(n.vk.Log(), "sandboxd features detected"), nil
	})
	k := &kubectlNode{vkNode: n, ns: ns, pod: "box", ip: ip, echoAddr: echoAddr, base: n.Sim.Counters()}
	for _, sb := range n.live() {
		if podKeyOf(sb) == ns+"/box" {
			k.sandbox = sb
		}
	}
	if k.sandbox.ID == "" {
		t.Fatalf("no VM for %s/box among %v", ns, n.live())
	}
	direct, err := pool.NewClient(pool.ClientOptions{BaseURL: n.srv.URL, Token: rootToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.CloseIdleConnections)
	k.direct = direct
	// The sandbox's token is the Pod's credential: it must never reach the
	// process's log, whatever the test did.
	t.Cleanup(func() {
		if tok := k.sandbox.Token; tok != "" && strings.Contains(n.vk.Log(), tok) {
			t.Errorf("vk-sandbox's log contains the sandbox token of %s", k.sandbox.ID)
		}
	})
	return k
}

// hostIP is this host's first global unicast IPv4 address, the kind the
// apiserver's node proxy dials, or 127.0.0.1 when it has none.
func hostIP() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// execVia names the two transports kubectl exec speaks to the apiserver:
// WebSocket (its default since 1.30; the apiserver proxies it to the node,
// which declares ExtendWebSocketsToKubelet) and SPDY (its fallback, passed
// through as is).
type execVia string

const (
	viaWebSocket execVia = "websocket"
	viaSPDY      execVia = "spdy"
)

// execResult is what kubectl exec shows: both streams and the error (a
// client-go CodeExitError for a non-zero exit code).
type execResult struct {
	stdout, stderr string
	err            error
}

// exec is kubectl exec through the apiserver: POST pods/exec, upgraded, with
// the streams asked for as kubectl asks for them.
func (k *kubectlNode) exec(t *testing.T, via execVia, stdin io.Reader, tty bool, cmd ...string) execResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	return k.execWithin(ctx, t, via, stdin, tty, cmd...)
}

// execWithin is exec until ctx ends: kubectl leaves then.
func (k *kubectlNode) execWithin(ctx context.Context, t *testing.T, via execVia, stdin io.Reader, tty bool, cmd ...string) execResult {
	t.Helper()
	req := env.Clientset().CoreV1().RESTClient().Post().Resource("pods").Namespace(k.ns).Name(k.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "agent", Command: cmd, Stdin: stdin != nil, Stdout: true, Stderr: !tty, TTY: tty}, scheme.ParameterCodec)
	var (
		ex  remotecommand.Executor
		err error
	)
	switch via {
	case viaWebSocket:
		ex, err = remotecommand.NewWebSocketExecutor(env.Config, "GET", req.URL().String())
	default:
		ex, err = remotecommand.NewSPDYExecutor(env.Config, "POST", req.URL())
	}
	if err != nil {
		t.Fatal(err)
	}
	// Safe for concurrent use: StreamWithContext returns when ctx ends
	// without waiting for its copying goroutines, which may still write.
	var out, errb testkit.Buffer
	opts := remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Tty: tty}
	if !tty {
		opts.Stderr = &errb
	}
	err = ex.StreamWithContext(ctx, opts)
	return execResult{stdout: out.String(), stderr: errb.String(), err: err}
}

// forwardVia names the two ways kubectl port-forward dials the apiserver:
// SPDY, and SPDY tunnelled over WebSocket (the node unwraps it).
type forwardVia string

const (
	forwardSPDY      forwardVia = "spdy"
	forwardWebSocket forwardVia = "spdy-over-websocket"
)

func (k *kubectlNode) dialer(t *testing.T, via forwardVia) httpstream.Dialer {
	t.Helper()
	u := env.Clientset().CoreV1().RESTClient().Post().Resource("pods").Namespace(k.ns).Name(k.pod).SubResource("portforward").URL()
	if via == forwardWebSocket {
		d, err := portforward.NewSPDYOverWebsocketDialer(u, env.Config)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	rt, upgrader, err := spdy.RoundTripperFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return spdy.NewDialer(upgrader, &http.Client{Transport: rt}, "POST", u)
}

// portForward is kubectl port-forward: a local listener on 127.0.0.1 whose
// connections are forwarded to the Pod's guestPort. It returns the local
// address; the forwarder stops with the test.
func (k *kubectlNode) portForward(t *testing.T, via forwardVia, remote int) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	var out, errOut testkit.Buffer
	fw, err := portforward.NewOnAddressesWithContext(ctx, k.dialer(t, via), []string{"127.0.0.1"},
		[]string{fmt.Sprintf("0:%d", remote)}, ready, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		done <- err // for the cleanup, which waits for the forwarder's end
		t.Fatalf("port-forward ended before it was ready: %v (%s)", err, errOut.String())
	case <-time.After(waitFor):
		t.Fatal("port-forward not ready")
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("ports %v, %v", ports, err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local)
}

// forwardOnce opens one forwarded connection by hand, as kubectl does for
// each local connection, and returns its data stream and what arrives on
// its error stream (which kubectl only logs).
func (k *kubectlNode) forwardOnce(t *testing.T, remote int) (httpstream.Stream, <-chan string) {
	t.Helper()
	conn, _, err := k.dialer(t, forwardSPDY).Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, fmt.Sprint(remote))
	h.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	_ = errStream.Close()
	msg := make(chan string, 1)
	go func() { b, _ := io.ReadAll(errStream); msg <- string(b) }()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	return data, msg
}

// kubeletAddr is the kubelet API's address: the last --listen-addr, which
// is the one the flag parser keeps.
func (n *vkNode) kubeletAddr() string {
	addr := n.vk.ListenAddr()
	if addr == "" {
		n.t.Fatal("no --listen-addr")
	}
	return addr
}

// kubeletGet calls the kubelet API directly, not through the apiserver,
// with an optional client certificate. It does not verify the serving
// certificate: what is under test is who the kubelet API lets in.
func (n *vkNode) kubeletGet(t *testing.T, path string, cert *tls.Certificate) (int, error) {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // see above
	if cert != nil {
		// Offered whatever CAs the server names: a client that only sends
		// a matching certificate would never test the server's check.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+n.kubeletAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (k *kubectlNode) summary(t *testing.T) *statsv1alpha1.Summary {
	t.Helper()
	raw, err := env.Clientset().CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", k.Name, "proxy", "stats", "summary").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("stats summary through the node proxy: %v", err)
	}
	var sum statsv1alpha1.Summary
	if err := json.Unmarshal(raw, &sum); err != nil {
		t.Fatalf("summary %s: %v", raw, err)
	}
	return &sum
}

func podStats(t *testing.T, sum *statsv1alpha1.Summary, ns, name string) statsv1alpha1.PodStats {
	t.Helper()
	i := slices.IndexFunc(sum.Pods, func(p statsv1alpha1.PodStats) bool { return p.PodRef.Namespace == ns && p.PodRef.Name == name })
	if i < 0 {
		t.Fatalf("pod %s/%s not in the summary: %+v", ns, name, sum.Pods)
	}
	return sum.Pods[i]
}

var execTrue = pool.ExecRequest{Argv: []string{"true"}}

// selfSignedClient is a client certificate with the apiserver's CN that no
// CA the node trusts signed.
func selfSignedClient(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	return testkit.Cert(t, &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, nil, nil)
}
