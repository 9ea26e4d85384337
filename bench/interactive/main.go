// Command interactive measures kubectl exec into a sandbox Pod beside
// kubectl port-forward to the same Pod, in one run, through a real etcd +
// kube-apiserver (internal/kubetest), the vk-sandbox binary's kubelet API, and
// the emulator (pool/sim) as sandboxd and as the guest's silkd:
//
//   - round trip of a new session: `exec POD -- true` against a new
//     forwarded connection that sends 16 bytes to a guest echo service
//     and reads them back (p50, p99);
//   - round trip in an open session: 16 bytes through `exec -i POD -- cat`
//     against 16 bytes through one forwarded connection to the echo;
//   - throughput: `exec POD -- cat FILE` of -size MiB (guest to client),
//     and `exec -i POD -- cat` of the same payload (both ways at once),
//     against the payload through the echo (both ways at once).
//
// The client is client-go's, as kubectl's own: remotecommand's WebSocket
// or SPDY executor against pods/exec and portforward's SPDY (over
// WebSocket) dialer against pods/portforward. The kubectl binary's start-up
// (process, kubeconfig, the Pod's GET: over 100 ms here) would add to every
// exec figure and to none of the port-forward ones, so -kubectl N times the
// new sessions with the binary apart. The new sessions are also timed
// straight at the emulator (its agent relay and port relay, no apiserver):
// the part that is sandboxd's and the guest's. Samples of every kind are
// interleaved, so that load from other tenants of the machine falls on all
// of them alike.
//
// Usage: go run ./bench/interactive [-n 300] [-size 64] [-reps 3] [-via websocket,spdy] [-kubectl 100]
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
)

type options struct {
	n, warmup, sizeMiB, reps, kubectl int
	via                               []string
	out, perf                         string
}

func parseOptions() (*options, error) {
	o := &options{}
	var via string
	flag.IntVar(&o.n, "n", 300, "round-trip samples of each kind")
	flag.IntVar(&o.warmup, "warmup", 20, "unrecorded round trips of each kind first")
	flag.IntVar(&o.sizeMiB, "size", 64, "MiB of the throughput payload")
	flag.IntVar(&o.reps, "reps", 3, "throughput repetitions of each kind (the median is reported)")
	flag.IntVar(&o.kubectl, "kubectl", 100, "also this many `kubectl exec POD -- true` with the kubectl binary (bin/kubectl, make tools), beside connections through `kubectl port-forward` (0: none)")
	flag.StringVar(&via, "via", viaWebSocket+","+viaSPDY, "comma-separated transports to the apiserver: websocket (kubectl's default), spdy")
	flag.StringVar(&o.perf, "perf", "", "directory: record perf call graphs (perf record -g) of vk-sandbox, kube-apiserver and this process (the emulator and the client) during each throughput step there, as <via>-<figure>-<rep>-<process>.perf.data (needs perf)")
	flag.StringVar(&o.out, "out", "bench/results/interactive-"+time.Now().Format("2006-01-02T150405")+".json", "results JSON")
	flag.Parse()
	if o.n < 1 || o.warmup < 0 || o.sizeMiB < 1 || o.reps < 1 || o.kubectl < 0 {
		return nil, fmt.Errorf("-n, -size and -reps must be positive, -warmup and -kubectl not negative")
	}
	for v := range strings.SplitSeq(via, ",") {
		if v = strings.TrimSpace(v); v != viaWebSocket && v != viaSPDY {
			return nil, fmt.Errorf("-via: unknown transport %q", v)
		}
		o.via = append(o.via, v)
	}
	return o, nil
}

func main() {
	o, err := parseOptions()
	podload.Main("interactive", err, func(ctx context.Context) error { return run(ctx, o) })
}

var logf = podload.Logf

func run(ctx context.Context, o *options) error {
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "interactive-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "vk-sandbox")
	if o.perf != "" {
		// perf report finds the symbols in the binary that ran, so it is
		// kept beside the recordings.
		if err := os.MkdirAll(o.perf, 0o755); err != nil {
			return err
		}
		bin = filepath.Join(o.perf, "vk-sandbox")
	}
	logf("building ./cmd/vk-sandbox")
	if err := kubetest.BuildVKSandbox(ctx, bin, false); err != nil {
		return err
	}
	env, err := kubetest.Start(ctx, kubetest.Options{Logf: logf})
	if err != nil {
		return err
	}
	defer env.Stop()
	n, err := startNode(ctx, env, bin, dir)
	if err != nil {
		return err
	}
	defer n.stop()

	payload := make([]byte, o.sizeMiB<<20)
	_, _ = rand.Read(payload)
	rep := report{Started: time.Now(), GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(),
		LoadAvgStart: podload.LoadAvg(), Samples: o.n, SizeMiB: o.sizeMiB, Reps: o.reps}
	before := n.counters()
	for _, via := range o.via {
		c := &client{cfg: env.Config, cs: env.Clientset(), ns: n.ns, via: via}
		logf("%s: %d round trips of each kind (after %d unrecorded)", via, o.n, o.warmup)
		r, err := roundTrips(ctx, c, n, o)
		if err != nil {
			return err
		}
		logf("%s: throughput, %d MiB, %d times each", via, o.sizeMiB, o.reps)
		if err := throughput(ctx, c, n, o, payload, &r); err != nil {
			return err
		}
		rep.Transports = append(rep.Transports, r)
	}
	if o.kubectl > 0 {
		k, err := newKubectlCLI(env.Kubeconfig, n.ns)
		if err != nil {
			return err
		}
		logf("kubectl: %d exec and port-forward connections (after %d unrecorded)", o.kubectl, min(o.warmup, 5))
		r, err := kubectlRoundTrips(ctx, k, o.kubectl, min(o.warmup, 5))
		if err != nil {
			return err
		}
		rep.Transports = append(rep.Transports, r)
	}
	after := n.counters()
	rep.LoadAvgEnd = podload.LoadAvg()
	rep.AgentRelays, rep.PortRelays = after["agent"]-before["agent"], after["ports"]-before["ports"]
	// The figures are of the streaming path: an exec that fell back to
	// sandboxd's buffered exec would measure something else.
	if b := after["exec"] - before["exec"]; b != 0 {
		return fmt.Errorf("%d execs went through sandboxd's buffered exec, not the agent relay", b)
	}
	if err := podload.WriteJSON(o.out, rep); err != nil {
		return err
	}
	printTable(os.Stdout, rep)
	fmt.Printf("\nresults: %s\n", o.out)
	return nil
}

// roundTrips takes the round-trip samples, interleaved: the four through
// the apiserver, and the two new sessions straight at the emulator.
func roundTrips(ctx context.Context, c *client, n *node, o *options) (transportResult, error) {
	r := transportResult{Via: c.via}
	local, stop, err := c.portForward(ctx)
	if err != nil {
		return r, err
	}
	defer stop()
	sess := c.openCat(ctx)
	conn, err := net.Dial("tcp", local)
	if err != nil {
		return r, err
	}
	defer conn.Close()
	var execNew, fwdNew, execOpen, fwdOpen, execDirect, fwdDirect []float64
	seconds := func(d float64) float64 { return d }
	if err := interleave(o.warmup+o.n, o.warmup, seconds,
		step{into: &execNew, f: func() error { return c.execTrue(ctx) }},
		step{into: &fwdNew, f: func() error { return connectEcho(local) }},
		step{into: &execOpen, f: func() error { return pingPong(sess.in, sess.out) }},
		step{into: &fwdOpen, f: func() error { return pingPong(conn, conn) }},
		step{into: &execDirect, f: func() error { return n.directExecTrue(ctx) }},
		step{into: &fwdDirect, f: func() error { return n.directEcho(ctx) }},
	); err != nil {
		_ = sess.in.CloseWithError(err)
		return r, fmt.Errorf("%s round trip: %w", c.via, err)
	}
	if err := sess.close(); err != nil {
		return r, fmt.Errorf("exec -i cat at the end of stdin: %w", err)
	}
	r.ExecNew, r.ForwardNew = podload.Summarize(execNew), podload.Summarize(fwdNew)
	r.ExecOpen, r.ForwardOpen = podload.Summarize(execOpen), podload.Summarize(fwdOpen)
	r.ExecDirect, r.ForwardDirect = podload.Summarize(execDirect), podload.Summarize(fwdDirect)
	return r, nil
}

// throughput moves payload reps times each way, interleaved, each
// checked byte for byte.
func throughput(ctx context.Context, c *client, n *node, o *options, payload []byte, r *transportResult) error {
	local, stop, err := c.portForward(ctx)
	if err != nil {
		return err
	}
	defer stop()
	sum := sha256.Sum256(payload)
	mib := float64(len(payload)) / (1 << 20)
	mibPerS := func(d float64) float64 { return mib / d }
	r.CPU = map[string]map[string]float64{figUpload: {}, figCatFile: {}, figCatEcho: {}, figForwardEcho: {}}
	recorded := perfRecorded(o.perf, c.via, n)
	if err := interleave(o.reps, 0, mibPerS,
		step{&r.UploadMiBs, r.CPU[figUpload], recorded(figUpload, func() error { return c.upload(ctx, payload) })},
		step{&r.CatFileMiBs, r.CPU[figCatFile], recorded(figCatFile, func() error { return c.catFile(ctx, payload, sum) })},
		step{&r.CatEchoMiBs, r.CPU[figCatEcho], recorded(figCatEcho, func() error { return c.catEcho(ctx, payload, sum) })},
		step{&r.ForwardEchoMiBs, r.CPU[figForwardEcho], recorded(figForwardEcho, func() error { return forwardEcho(local, payload, sum) })},
	); err != nil {
		return fmt.Errorf("%s throughput: %w", c.via, err)
	}
	// CPU seconds per step become CPU milliseconds per MiB moved.
	for _, byProc := range r.CPU {
		for k, v := range byProc {
			byProc[k] = v * 1000 / (mib * float64(o.reps))
		}
	}
	return nil
}

// perfRecorded wraps a throughput step so that, with -perf dir, each of
// its runs is recorded into files of its own (podload.StartPerf); without
// it the step is left as it is.
func perfRecorded(dir, via string, n *node) func(fig string, f func() error) func() error {
	if dir == "" {
		return func(_ string, f func() error) func() error { return f }
	}
	pids := map[string]int{"vk-sandbox": n.vk.Pid(), "kube-apiserver": podload.ChildPID("kube-apiserver"), "harness": os.Getpid()}
	return func(fig string, f func() error) func() error {
		rep := 0
		return func() error {
			rep++
			defer podload.StartPerf(dir, fmt.Sprintf("%s-%s-%d", via, fig, rep), pids)()
			return f()
		}
	}
}

// step is one kind of sample: f, timed, into its series; with cpu, the
// CPU seconds of each process (podload.CPUSnapshot) during f are added
// there.
type step struct {
	into *[]float64
	cpu  map[string]float64
	f    func() error
}

// interleave runs the steps in turn, rounds times, so that the machine's
// load falls on every kind alike; rounds before skip are not recorded, the
// others append value(seconds).
func interleave(rounds, skip int, value func(float64) float64, steps ...step) error {
	for i := range rounds {
		for _, s := range steps {
			var cpu0 map[string]float64
			if s.cpu != nil {
				cpu0 = podload.CPUSnapshot()
			}
			d, err := timed(s.f)
			if err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
			if s.cpu != nil {
				for k, v := range podload.CPUDelta(cpu0, podload.CPUSnapshot()) {
					s.cpu[k] += v
				}
			}
			if i >= skip {
				*s.into = append(*s.into, value(d))
			}
		}
	}
	return nil
}
