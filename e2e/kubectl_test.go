package e2e

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientexec "k8s.io/client-go/util/exec"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// kubectl exec through the apiserver, over both of kubectl's transports:
// both streams arrive, and the command's exit code is kubectl's. Output
// streams through silkd, so more than the buffered exec's 8 MiB arrives.
func TestKubectlExecPassesOutputAndExitCode(t *testing.T) {
	k := startKubectlNode(t)
	for _, via := range []execVia{viaWebSocket, viaSPDY} {
		t.Run(string(via), func(t *testing.T) {
			r := k.exec(t, via, nil, false, "sh", "-c", "echo out; echo err >&2; exit 3")
			var ce clientexec.CodeExitError
			if !errors.As(r.err, &ce) || ce.Code != 3 {
				t.Fatalf("exec: %v, want exit code 3", r.err)
			}
			if r.stdout != "out\n" || r.stderr != "err\n" {
				t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
			}
			if r := k.exec(t, via, nil, false, "echo", "hello", "sandbox"); r.err != nil || r.stdout != "hello sandbox\n" {
				t.Errorf("exit 0: %v, stdout %q", r.err, r.stdout)
			}
			r = k.exec(t, via, nil, false, "head", "-c", "9000000", "/dev/zero")
			if r.err != nil || len(r.stdout) != 9000000 {
				t.Errorf("9 MB of output: %v, %d bytes", r.err, len(r.stdout))
			}
		})
	}
	if n, b := k.counter("agent"), k.counter("exec"); n != 6 || b != 0 {
		t.Errorf("sandboxd saw %d agent relays and %d buffered execs, want 6 and 0", n, b)
	}
}

// -i passes stdin through silkd, over both transports.
func TestKubectlExecPassesStdin(t *testing.T) {
	k := startKubectlNode(t)
	for _, via := range []execVia{viaWebSocket, viaSPDY} {
		r := k.exec(t, via, strings.NewReader("typed\n"), false, "cat")
		if r.err != nil || r.stdout != "typed\n" {
			t.Errorf("%s: kubectl exec -i cat: %v, stdout %q", via, r.err, r.stdout)
		}
	}
	if n := k.counter("exec"); n != 0 {
		t.Errorf("sandboxd saw %d buffered execs", n)
	}
}

// kubectl port-forward through the apiserver carries 64 MiB each way with
// its checksum intact, over SPDY and over SPDY tunnelled in WebSocket; the
// client's half-close reaches the guest, whose own half-close comes back as
// EOF. The same payload over a direct relay to the emulator is the
// baseline of the logged throughput.
func TestKubectlPortForwardCarries64MiBBothWays(t *testing.T) {
	k := startKubectlNode(t)
	payload := make([]byte, 64<<20)
	_, _ = rand.Read(payload)
	throughput := map[string]float64{}
	for _, via := range []forwardVia{forwardSPDY, forwardWebSocket} {
		t.Run(string(via), func(t *testing.T) {
			local := k.portForward(t, via, guestPort)
			c, err := net.Dial("tcp", local)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			throughput[string(via)] = testkit.EchoRoundTrip(t, c.(*net.TCPConn), payload)
			// Every local connection is a relay of its own.
			c2, err := net.Dial("tcp", local)
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			testkit.EchoRoundTrip(t, c2.(*net.TCPConn), []byte("second connection"))
		})
	}
	conn, err := k.direct.DialPort(t.Context(), k.sandbox.ID, k.sandbox.Token, guestPort)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	direct := testkit.EchoRoundTrip(t, conn, payload)
	for _, via := range []forwardVia{forwardSPDY, forwardWebSocket} {
		if v := throughput[string(via)]; v > 0 {
			t.Logf("measurement: port-forward %s through the apiserver %.0f MiB/s, direct relay to the emulator %.0f MiB/s: %.2fx of direct (64 MiB each way, same run)",
				via, v, direct, v/direct)
		}
	}
}

// A port nothing listens on in the guest reaches kubectl as a sentence on
// the forwarded connection's error stream, without the sandbox token.
func TestKubectlPortForwardNothingListens(t *testing.T) {
	k := startKubectlNode(t)
	data, msg := k.forwardOnce(t, 7000)
	defer data.Close()
	select {
	case m := <-msg:
		want := fmt.Sprintf("nothing listens on port 7000 in sandbox %s", k.sandbox.ID)
		if !strings.Contains(m, want) || strings.Contains(m, k.sandbox.Token) {
			t.Errorf("error stream %q, want it to say %q", m, want)
		}
	case <-time.After(waitFor):
		t.Fatal("no answer on the error stream")
	}
}

// The stats summary and /metrics/resource, read through the apiserver's
// node proxy as metrics-server and kubectl get --raw do: the VM's memory as
// the Pod's working set, no CPU, and no memory once sandboxd cannot
// measure it.
func TestKubectlStatsSummaryThroughTheNodeProxy(t *testing.T) {
	k := startKubectlNode(t)
	if !k.proxyable() {
		t.Fatal("this host has no global unicast address: the apiserver's node proxy refuses to dial a loopback node, so the stats summary cannot be read through it here")
	}
	k.Sim.SetMemUsed(k.sandbox.ID, 200<<20)
	sum := k.summary(t)
	box := podStats(t, sum, k.ns, "box")
	if box.Memory == nil || box.Memory.WorkingSetBytes == nil || *box.Memory.WorkingSetBytes != 200<<20 {
		t.Fatalf("box memory %+v, want a 200 MiB working set", box.Memory)
	}
	if box.CPU != nil || len(box.Containers) != 1 || box.Containers[0].Name != "agent" || box.Containers[0].CPU != nil {
		t.Errorf("box %+v: no CPU without a reading, one container", box)
	}
	if sum.Node.NodeName != k.Name {
		t.Errorf("node name %q, want %q", sum.Node.NodeName, k.Name)
	}
	raw, err := env.Clientset().CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", k.Name, "proxy", "metrics", "resource").DoRaw(t.Context())
	want := fmt.Sprintf(`container_memory_working_set_bytes{container="agent",namespace="%s",pod="box"} 2.097152e+08`, k.ns)
	if err != nil || !strings.Contains(string(raw), want) || strings.Contains(string(raw), "cpu_usage") {
		t.Errorf("/metrics/resource: %v\n%s\nwant %s and no CPU series", err, raw, want)
	}
	k.Sim.Hibernate(k.sandbox.ID)
	if box := podStats(t, k.summary(t), k.ns, "box"); box.Memory != nil {
		t.Errorf("hibernated VM reported memory %+v: sandboxd did not measure it", box.Memory)
	}
}

// kubectl logs says where the output lives instead of an empty log.
func TestKubectlLogsSaysWhereTheOutputIs(t *testing.T) {
	k := startKubectlNode(t)
	// Stream is how kubectl logs reads: it shows the apiserver's message.
	_, err := env.Clientset().CoreV1().Pods(k.ns).GetLogs("box", &corev1.PodLogOptions{}).Stream(t.Context())
	if err == nil || !strings.Contains(err.Error(), "sandboxd does not capture") || !strings.Contains(err.Error(), "kubectl exec") {
		t.Errorf("logs: %v", err)
	}
}

// The kubelet API lets in only what the apiserver proxies: anonymous
// clients get 401 and a certificate from another CA fails the handshake.
// (The tests above prove the apiserver's own certificate gets through.)
func TestKubeletAPIAdmitsOnlyVerifiedClients(t *testing.T) {
	k := startKubectlNode(t)
	if code, err := k.kubeletGet(t, "/stats/summary", nil); err != nil || code != 401 {
		t.Errorf("anonymous: %d, %v; want 401", code, err)
	}
	forged := selfSignedClient(t, "kube-apiserver-kubelet-client")
	if code, err := k.kubeletGet(t, "/stats/summary", &forged); err == nil {
		t.Errorf("a certificate the cluster CA did not sign: %d, want a refused handshake", code)
	}
}

// The added latency of kubectl exec through the apiserver, against a direct
// exec call to the emulator in the same run: logged, not asserted.
func TestKubectlExecLatencyMeasured(t *testing.T) {
	k := startKubectlNode(t)
	const n = 20
	median := func(run func() error) time.Duration {
		t.Helper()
		ds := make([]time.Duration, 0, n)
		for range n {
			start := time.Now()
			if err := run(); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[n/2]
	}
	direct := median(func() error {
		_, err := k.direct.Exec(t.Context(), k.sandbox.ID, k.sandbox.Token, execTrue)
		return err
	})
	for _, via := range []execVia{viaSPDY, viaWebSocket} {
		through := median(func() error { return k.exec(t, via, nil, false, "true").err })
		t.Logf("measurement: exec over %s through the apiserver, median of %d: %s; direct exec to the emulator: %s; %.1fx, %s added",
			via, n, through.Round(10*time.Microsecond), direct.Round(10*time.Microsecond),
			float64(through)/float64(direct), (through - direct).Round(10*time.Microsecond))
	}
}

// An exec whose streams carry nothing for --exec-idle-timeout is closed, as
// the kubelet closes an idle stream, and its command in the guest is killed
// (a kill is sent only for a command still running when its session ends).
func TestKubectlExecIdleSessionIsClosedAndItsCommandKilled(t *testing.T) {
	k := startKubectlNodeWith(t, sim.Config{}, "--exec-idle-timeout", "1s")
	for i, via := range []execVia{viaWebSocket, viaSPDY} {
		// sleep 50 outlasts the idle timeout and ends within exec's 60 s.
		r := k.exec(t, via, nil, false, "sleep", "50")
		t.Logf("%s: the idle exec ended with %v", via, r.err)
		testkit.WaitFor(t, waitFor, "the guest's sleep killed", func() bool { return k.counter("agent_kill") == int64(i+1) })
	}
}

// The node declares ExtendWebSocketsToKubelet, so the apiserver proxies
// kubectl's WebSocket exec and port-forward to it as they are, instead of
// translating them to SPDY (about three times the apiserver's CPU per
// byte): its own counter of WebSocket streaming requests shows which.
func TestWebSocketExecAndPortForwardAreProxiedToTheNode(t *testing.T) {
	k := startKubectlNode(t)
	node, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), k.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// kube-apiserver's feature gate, by the name it looks for.
	if !slices.Contains(node.Status.DeclaredFeatures, "ExtendWebSocketsToKubelet") {
		t.Fatalf("node declares %v, want ExtendWebSocketsToKubelet", node.Status.DeclaredFeatures)
	}
	before := websocketRoutes(t)
	if r := k.exec(t, viaWebSocket, strings.NewReader("over websocket"), false, "cat"); r.err != nil || r.stdout != "over websocket" {
		t.Fatalf("exec: %v, stdout %q", r.err, r.stdout)
	}
	c, err := net.Dial("tcp", k.portForward(t, forwardWebSocket, guestPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testkit.EchoRoundTrip(t, c.(*net.TCPConn), []byte("tunnelled"))
	after := websocketRoutes(t)
	for _, sub := range []string{"exec", "portforward"} {
		if d := after[sub+"/proxied_to_kubelet"] - before[sub+"/proxied_to_kubelet"]; d < 1 {
			t.Errorf("%s: %v WebSocket requests proxied to the node, want 1 (routes before %v, after %v)", sub, d, before, after)
		}
		if d := after[sub+"/translated_at_apiserver"] - before[sub+"/translated_at_apiserver"]; d != 0 {
			t.Errorf("%s: %v WebSocket requests translated by the apiserver, want none", sub, d)
		}
	}
}

// websocketRoutes reads kube-apiserver's apiserver_websocket_streaming_requests_total
// by "subresource/proxy_type".
func websocketRoutes(t *testing.T) map[string]float64 {
	t.Helper()
	raw, err := env.Clientset().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseText(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range s["apiserver_websocket_streaming_requests_total"] {
		out[sm.labels["subresource"]+"/"+sm.labels["proxy_type"]] += sm.value
	}
	return out
}
