// Command burst measures a burst of sandbox Pods end to end against one
// real etcd + kube-apiserver (kube/kubetest): N Pods created at once, and
// the time until the last is Running with a podIP, observed by watch.
//
// Modes, each in a fresh namespace:
//
//	bare                       the apiserver's own limit: N creates plus N
//	                           status updates from this process, no provider
//	provider                   the vk-sandbox binary with the in-process
//	                           emulator (pool/sim) as sandboxd
//	provider-default-limiters  the same with --default-rate-limiters
//	                           (virtual-kubelet's 10 qps / burst 100 queues)
//
// Usage: go run ./bench/burst [-n 100,1000] [-modes ...] [-out FILE.json]
//
// It writes FILE.json (every run, with a progress timeline) and FILE.csv
// (one row per Pod; bench/plot -cdf draws its latency CDF).
package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/kube/kubetest"
)

type options struct {
	sizes        []int
	modes        []string
	claimLatency time.Duration
	out          string
	keep         bool
	workers      int
	timeout      time.Duration
	warmup       int
	metrics      bool
	perf         string
	settle       time.Duration
	vkArgs       []string
}

func parseOptions() (*options, error) {
	o := &options{}
	var sizes, modes, vkArgs string
	flag.StringVar(&sizes, "n", "100,1000", "comma-separated burst sizes")
	flag.StringVar(&modes, "modes", strings.Join([]string{modeBare, modeProvider, modeDefault}, ","), "comma-separated modes: bare, provider, provider-default-limiters")
	flag.DurationVar(&o.claimLatency, "claim-latency", 500*time.Microsecond, "emulator claim latency (sim.Config.ClaimLatency)")
	flag.StringVar(&o.out, "out", "bench/results/burst-"+time.Now().Format("2006-01-02T150405")+".json", "results JSON; the per-Pod CSV goes beside it with a .csv extension")
	flag.BoolVar(&o.keep, "keep", false, "leave the control plane up after the runs, print KUBECONFIG, wait for ^C")
	flag.IntVar(&o.workers, "workers", 64, "concurrent create calls (and status calls in bare)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "cap of one run; a run that hits it reports partial completion")
	flag.IntVar(&o.warmup, "warmup", 50, "Pods of an unrecorded bare run first, to warm the apiserver (0: none)")
	flag.BoolVar(&o.metrics, "metrics", false, "expose vk-sandbox /metrics on a loopback port, sample its queue depth during each run and save the final scrape beside -out")
	flag.StringVar(&o.perf, "perf", "", "directory: record perf call graphs (perf record -g) of vk-sandbox and kube-apiserver during each burst there (needs perf, root)")
	flag.DurationVar(&o.settle, "settle", 0, "after each provider burst, wait this long before stopping vk-sandbox and count the Events again (are they late or lost?)")
	flag.StringVar(&vkArgs, "vk-args", "", "extra vk-sandbox flags, space separated (e.g. \"--kube-api-qps 1000 --kube-api-burst 2000\")")
	flag.Parse()
	for s := range strings.SplitSeq(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-n: %q is not a positive integer", s)
		}
		o.sizes = append(o.sizes, n)
	}
	for m := range strings.SplitSeq(modes, ",") {
		m = strings.TrimSpace(m)
		if m != modeBare && m != modeProvider && m != modeDefault {
			return nil, fmt.Errorf("-modes: unknown mode %q", m)
		}
		o.modes = append(o.modes, m)
	}
	o.vkArgs = strings.Fields(vkArgs)
	return o, nil
}

func main() {
	o, err := parseOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, "burst:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "burst:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

type report struct {
	Started      time.Time   `json:"started"`
	GoVersion    string      `json:"go_version"`
	NumCPU       int         `json:"num_cpu"`
	ClaimLatency string      `json:"claim_latency"`
	Workers      int         `json:"workers"`
	VKArgs       []string    `json:"vk_args,omitempty"`
	Runs         []runResult `json:"runs"`
}

type runResult struct {
	N         int    `json:"n"`
	Mode      string `json:"mode"`
	Namespace string `json:"namespace"`
	Node      string `json:"node,omitempty"`
	LoadAvg   string `json:"loadavg_at_start"`
	Running   int    `json:"running"`
	Complete  bool   `json:"complete"`
	TimedOut  bool   `json:"timed_out"`
	Errors    int64  `json:"errors"`
	LastError string `json:"last_error,omitempty"`
	// WallS is the headline: first create call → last Pod Running. For
	// bare that is the last UpdateStatus acknowledged; for the provider
	// modes (where only the watch can tell) the last Running received by
	// watch. WatchS is the latter for every mode.
	WallS    float64 `json:"wall_s"`
	WatchS   float64 `json:"watch_wall_s"`
	CreatesS float64 `json:"creates_done_s"`    // first create call → last create acknowledged
	ClaimsS  float64 `json:"claims_done_s"`     // first create call → last claimed_at (provider)
	Claims   int64   `json:"claims"`            // emulator claim_ok after vk-sandbox stopped
	ClaimsOK bool    `json:"claims_exactly_n"`  // Claims == N (provider)
	VKExit   string  `json:"vk_exit,omitempty"` // "0" or the error
	MaxQueue float64 `json:"max_queue_depth"`   // sum over shards, sampled (with -metrics)
	Metrics  string  `json:"metrics_file,omitempty"`
	ClaimAnn int     `json:"running_with_claim_id_annotation"`
	Events   int     `json:"events"` // Events in the namespace when the last Pod was Running
	// EventsSettled is the count again after -settle (0: not measured).
	EventsSettled int `json:"events_after_settle,omitempty"`
	// CPU seconds used during the burst (first create to last Running) by
	// process: harness (this process: client, watch, emulator),
	// kube-apiserver, etcd, vk-sandbox; machine = every process on the
	// machine, other = machine minus those (other users of the cores).
	CPU map[string]float64 `json:"cpu_s"`
	// APIRequests is the apiserver's apiserver_request_total delta over the
	// burst, "VERB resource[/subresource] code" → count (every client).
	APIRequests map[string]int `json:"api_requests"`
	// Per-Pod latencies. Client: create call issued → Running received by
	// watch (full resolution). CreationTS: creationTimestamp → Running
	// received; creationTimestamp has 1 s resolution, so this is biased up
	// by up to 1 s. Stages: the create call itself; create acknowledged →
	// claimed at the emulator; claimed → Running received.
	LatClient         stats    `json:"lat_client"`
	LatCreationTS     stats    `json:"lat_creation_ts"`
	LatCreateCall     stats    `json:"lat_create_call"`
	LatAckToSeen      stats    `json:"lat_ack_to_seen"` // create acknowledged → first watch event (apiserver watch delivery)
	LatAckToClaim     stats    `json:"lat_ack_to_claim,omitzero"`
	LatClaimToRunning stats    `json:"lat_claim_to_running,omitzero"`
	Timeline          []sample `json:"timeline"`
}

type bench struct {
	o     *options
	env   *kubetest.Env
	cs    kubernetes.Interface
	vkBin string
	dir   string
	seq   int
}

func run(ctx context.Context, o *options) error {
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "burst-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &bench{o: o, dir: dir}
	if slices.ContainsFunc(o.modes, func(m string) bool { return m != modeBare }) {
		b.vkBin = filepath.Join(dir, "vk-sandbox")
		logf("building ./cmd/vk-sandbox")
		build := exec.CommandContext(ctx, "go", "build", "-o", b.vkBin, "./cmd/vk-sandbox")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build vk-sandbox (run from the repository root): %w", err)
		}
	}
	env, err := kubetest.Start(ctx, kubetest.Options{Logf: logf})
	if err != nil {
		return err
	}
	defer env.Stop()
	b.env = env
	rc := *env.Config
	rc.QPS, rc.Burst = 1000, 2000
	if b.cs, err = kubernetes.NewForConfig(&rc); err != nil {
		return err
	}

	if o.warmup > 0 {
		logf("warm-up: unrecorded bare run of %d Pods", o.warmup)
		if r, _ := b.run(ctx, o.warmup, modeBare); !r.Complete {
			return fmt.Errorf("warm-up failed: %d/%d Running, %s", r.Running, r.N, r.LastError)
		}
	}
	rep := report{Started: time.Now(), GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(),
		ClaimLatency: o.claimLatency.String(), Workers: o.workers, VKArgs: o.vkArgs}
	var rows [][]string
	for _, n := range o.sizes {
		for _, m := range o.modes {
			if ctx.Err() != nil {
				break
			}
			logf("run: N=%d mode=%s", n, m)
			r, pods := b.run(ctx, n, m)
			logf("run: N=%d mode=%s: %d/%d Running in %.3fs (errors %d %s)", n, m, r.Running, n, r.WallS, r.Errors, r.LastError)
			rep.Runs = append(rep.Runs, r)
			rows = append(rows, podRows(r, pods)...)
			if err := writeOutputs(o.out, rep, rows); err != nil {
				return err
			}
		}
	}
	printTable(os.Stdout, rep.Runs)
	fmt.Printf("\nresults: %s\nper-Pod CSV: %s\n", o.out, csvPath(o.out))
	if o.keep && ctx.Err() == nil {
		fmt.Printf("\ncontrol plane kept: export KUBECONFIG=%s\n(^C to stop it)\n", env.Kubeconfig)
		<-ctx.Done()
		return nil
	}
	return ctx.Err()
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// run does one burst of n Pods in mode in a fresh namespace.
func (b *bench) run(ctx context.Context, n int, mode string) (runResult, []podRec) {
	b.seq++
	r := runResult{N: n, Mode: mode, LoadAvg: loadAvg()}
	failed := func(err error) (runResult, []podRec) { r.LastError = err.Error(); r.Errors++; return r, nil }
	ns, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("burst-%d-", n)}}, metav1.CreateOptions{})
	if err != nil {
		return failed(err)
	}
	r.Namespace = ns.Name
	defer b.cleanup(r.Namespace)

	var node *vkNode
	if mode != modeBare {
		r.Node = fmt.Sprintf("burst-vk-%d-%d", os.Getpid(), b.seq)
		dir := filepath.Join(b.dir, r.Node)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return failed(err)
		}
		node, err = startVK(ctx, b.cs, nodeOpts{
			bin: b.vkBin, kubeconfig: b.env.Kubeconfig, dir: dir, name: r.Node, n: n,
			claimLatency: b.o.claimLatency, defaultLimiters: mode == modeDefault, metrics: b.o.metrics,
			extraArgs: b.o.vkArgs,
		})
		if err != nil {
			return failed(err)
		}
		defer node.stop()
	}

	t := newTracker(n)
	stopWatch, err := watchNamespace(ctx, b.cs, r.Namespace, t)
	if err != nil {
		return failed(err)
	}
	rctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	var claims func() int64
	if node != nil {
		claims = func() int64 { return node.sim.Counters()["claim_ok"] }
	}
	var stopPerf func()
	if b.o.perf != "" {
		stopPerf = startPerf(b.o.perf, fmt.Sprintf("%d-%s", n, mode), node)
	}
	req0 := apiRequests(ctx, b.cs)
	cpu0 := cpuSnapshot()
	t0 := time.Now()
	timeline := sampleProgress(rctx, t0, t, claims)
	var maxQueue func() float64
	if node != nil && node.metrics != "" {
		maxQueue = sampleQueueDepth(rctx, node)
	}
	created := make(chan struct{})
	go func() {
		defer close(created)
		if mode == modeBare {
			runBare(rctx, b.cs, r.Namespace, n, b.o.workers, t)
		} else {
			createAll(rctx, b.cs, t, b.o.workers, podNames(r.Namespace, r.Node, n), nil)
		}
	}()
	select {
	case <-t.done:
		r.Complete = true
	case <-rctx.Done():
		r.TimedOut = ctx.Err() == nil
	}
	r.CPU = cpuDelta(cpu0, cpuSnapshot())
	r.APIRequests = requestDelta(req0, apiRequests(ctx, b.cs))
	if stopPerf != nil {
		stopPerf()
	}
	<-created
	cancel()
	stopWatch()
	r.Timeline = timeline()
	if maxQueue != nil {
		r.MaxQueue = maxQueue()
	}
	r.Running = t.runningCount()
	t.mu.Lock()
	r.ClaimAnn = t.claimAnn
	t.mu.Unlock()
	r.Errors = t.errs.Load()
	if p := t.lastErr.Load(); p != nil {
		r.LastError = *p
	}

	pods := t.snapshot()
	if l, err := b.cs.CoreV1().Events(r.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		r.Events = len(l.Items)
	}
	if node != nil && b.o.settle > 0 {
		time.Sleep(b.o.settle)
		if l, err := b.cs.CoreV1().Events(r.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
			r.EventsSettled = len(l.Items)
			reasons := map[string]int{}
			for _, e := range l.Items {
				reasons[e.Reason]++
			}
			logf("events: %d when the last Pod was Running, %d after %s, by reason %v", r.Events, r.EventsSettled, b.o.settle, reasons)
		}
	}
	if node != nil {
		if body, err := node.scrape(); err == nil && body != "" {
			r.Metrics = strings.TrimSuffix(b.o.out, ".json") + fmt.Sprintf("-%d-%s.metrics.txt", n, mode)
			_ = os.WriteFile(r.Metrics, []byte(body), 0o644)
		}
		ct := node.claimTimes()
		for i := range pods {
			pods[i].Claimed = ct[r.Namespace+"/"+pods[i].Name]
		}
		if err := node.stop(); err != nil {
			r.VKExit = err.Error()
			logf("vk-sandbox exit: %v; log tail:\n%s", err, tail(node.log, 20))
		} else {
			r.VKExit = "0"
		}
		r.Claims = node.sim.Counters()["claim_ok"]
		r.ClaimsOK = r.Claims == int64(n)
		if !r.ClaimsOK {
			logf("ASSERTION FAILED: emulator counted %d claims, want %d", r.Claims, n)
		}
	}
	fillStats(&r, pods)
	return r, pods
}

// cleanup deletes the run's Pods and Events at once (grace 0), so later
// runs do not pay for them. The namespace stays: no namespace controller
// runs here, so a deleted namespace would stay Terminating.
func (b *bench) cleanup(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zero := int64(0)
	if err := b.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		logf("cleanup pods in %s: %v", ns, err)
	}
	if err := b.cs.CoreV1().Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		logf("cleanup events in %s: %v", ns, err)
	}
}

func sampleQueueDepth(ctx context.Context, v *vkNode) func() float64 {
	done := make(chan float64, 1)
	go func() {
		peak := 0.0
		defer func() { done <- peak }()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			body, err := v.scrape()
			if err != nil {
				continue
			}
			sum := 0.0
			for line := range strings.SplitSeq(body, "\n") {
				if strings.HasPrefix(line, "vksandbox_queue_depth") {
					f := strings.Fields(line)
					x, _ := strconv.ParseFloat(f[len(f)-1], 64)
					sum += x
				}
			}
			peak = max(peak, sum)
		}
	}()
	return func() float64 { return <-done }
}

func fillStats(r *runResult, pods []podRec) {
	var t0, lastAck, lastClaim, lastRun, lastStatus time.Time
	for _, p := range pods {
		if !p.CreateStart.IsZero() && (t0.IsZero() || p.CreateStart.Before(t0)) {
			t0 = p.CreateStart
		}
	}
	var client, cts, call, ack2seen, ack2claim, claim2run []float64
	for _, p := range pods {
		if p.CreateAck.After(lastAck) {
			lastAck = p.CreateAck
		}
		if p.StatusAck.After(lastStatus) {
			lastStatus = p.StatusAck
		}
		if p.Claimed.After(lastClaim) {
			lastClaim = p.Claimed
		}
		if !p.CreateAck.IsZero() && !p.CreateStart.IsZero() {
			call = append(call, p.CreateAck.Sub(p.CreateStart).Seconds())
		}
		if !p.Seen.IsZero() && !p.CreateAck.IsZero() {
			ack2seen = append(ack2seen, p.Seen.Sub(p.CreateAck).Seconds())
		}
		if !p.Claimed.IsZero() && !p.CreateAck.IsZero() {
			ack2claim = append(ack2claim, p.Claimed.Sub(p.CreateAck).Seconds())
		}
		if p.Running.IsZero() {
			continue
		}
		if p.Running.After(lastRun) {
			lastRun = p.Running
		}
		if !p.CreateStart.IsZero() {
			client = append(client, p.Running.Sub(p.CreateStart).Seconds())
		}
		if !p.Created.IsZero() {
			cts = append(cts, p.Running.Sub(p.Created.Time).Seconds())
		}
		if !p.Claimed.IsZero() {
			claim2run = append(claim2run, p.Running.Sub(p.Claimed).Seconds())
		}
	}
	since := func(t time.Time) float64 {
		if t.IsZero() || t0.IsZero() {
			return 0
		}
		return t.Sub(t0).Seconds()
	}
	r.WatchS, r.CreatesS, r.ClaimsS = since(lastRun), since(lastAck), since(lastClaim)
	r.WallS = r.WatchS
	if r.Mode == modeBare {
		r.WallS = since(lastStatus)
	}
	r.LatClient, r.LatCreationTS, r.LatCreateCall = summarize(client), summarize(cts), summarize(call)
	r.LatAckToSeen, r.LatAckToClaim, r.LatClaimToRunning = summarize(ack2seen), summarize(ack2claim), summarize(claim2run)
}

func csvPath(out string) string { return strings.TrimSuffix(out, filepath.Ext(out)) + ".csv" }

var csvHeader = []string{"n", "mode", "pod", "create_start_s", "create_ack_s", "seen_s", "claimed_s", "status_ack_s", "running_s", "client_latency_s", "creation_ts_latency_s"}

// podRows: times relative to the run's first create call; empty = not seen.
func podRows(r runResult, pods []podRec) [][]string {
	var t0 time.Time
	for _, p := range pods {
		if !p.CreateStart.IsZero() && (t0.IsZero() || p.CreateStart.Before(t0)) {
			t0 = p.CreateStart
		}
	}
	rel := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return strconv.FormatFloat(t.Sub(t0).Seconds(), 'f', 6, 64)
	}
	d := func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() {
			return ""
		}
		return strconv.FormatFloat(b.Sub(a).Seconds(), 'f', 6, 64)
	}
	slices.SortFunc(pods, func(a, b podRec) int { return strings.Compare(a.Name, b.Name) })
	out := make([][]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, []string{strconv.Itoa(r.N), r.Mode, p.Name, rel(p.CreateStart), rel(p.CreateAck),
			rel(p.Seen), rel(p.Claimed), rel(p.StatusAck), rel(p.Running), d(p.CreateStart, p.Running), d(p.Created.Time, p.Running)})
	}
	return out
}

func writeOutputs(out string, rep report, rows [][]string) error {
	j, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, append(j, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(csvPath(out))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write(csvHeader)
	_ = w.WriteAll(rows)
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func printTable(w *os.File, runs []runResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tmode\tdone\twall_s\twatch_s\tcreates_s\tclaims_s\tp50_s\tp90_s\tp99_s\tcts_p50_s\tcts_p99_s\tclaims\tvk_exit\t")
	for _, r := range runs {
		done := fmt.Sprintf("%d/%d", r.Running, r.N)
		if r.TimedOut {
			done += " TIMEOUT"
		}
		claims := "-"
		if r.Mode != modeBare {
			claims = strconv.FormatInt(r.Claims, 10)
			if !r.ClaimsOK {
				claims += " (!)"
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.3f\t%.3f\t%.3f\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%s\t\n",
			r.N, r.Mode, done, r.WallS, r.WatchS, r.CreatesS, opt(r.ClaimsS), r.LatClient.P50, r.LatClient.P90, r.LatClient.P99,
			r.LatCreationTS.P50, r.LatCreationTS.P99, claims, cmpOr(r.VKExit, "-"))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nwall_s: first create -> last Pod Running (bare: last UpdateStatus acknowledged; provider modes: last Running seen by watch)")
	fmt.Fprintln(w, "watch_s: first create -> last Running seen by watch, every mode; creates_s: -> last create acknowledged; claims_s: -> last claim at the emulator")
	fmt.Fprintln(w, "p50/p90/p99: per Pod, create call issued -> Running seen by watch; cts_*: creationTimestamp (1 s resolution, biased up by <1 s) -> Running seen")

	fmt.Fprintln(w, "\nstages, p50 / p99 seconds (claims: provider modes only; ack->claimed can be < 0: vk-sandbox's watch may beat the create response):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tmode\tcreate call\tack->watch seen\tack->claimed\tclaimed->Running\tmax queue\tevents\t")
	for _, r := range runs {
		q := "-"
		if r.Metrics != "" {
			q = strconv.FormatFloat(r.MaxQueue, 'f', 0, 64)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.3f / %.3f\t%.3f / %.3f\t%.3f / %.3f\t%.3f / %.3f\t%s\t%d\t\n", r.N, r.Mode,
			r.LatCreateCall.P50, r.LatCreateCall.P99, r.LatAckToSeen.P50, r.LatAckToSeen.P99,
			r.LatAckToClaim.P50, r.LatAckToClaim.P99, r.LatClaimToRunning.P50, r.LatClaimToRunning.P99, q, r.Events)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nCPU seconds during the burst (first create to last Running seen), by process; busy = machine / (watch_s x cores):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tmode\tharness\tkube-apiserver\tetcd\tvk-sandbox\tother\tmachine\tbusy\t")
	for _, r := range runs {
		c := r.CPU
		busy := "-"
		if r.WallS > 0 {
			busy = fmt.Sprintf("%.0f%%", 100*c["machine"]/(r.WatchS*float64(runtime.NumCPU())))
		}
		fmt.Fprintf(tw, "%d\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t\n", r.N, r.Mode,
			c["harness"], c["kube-apiserver"], c["etcd"], c["vk-sandbox"], c["other"], c["machine"], busy)
	}
	tw.Flush()

	fmt.Fprintln(w, "\napiserver requests during the burst (apiserver_request_total delta, top 8):")
	for _, r := range runs {
		fmt.Fprintf(w, "  %d %s: %s\n", r.N, r.Mode, topRequests(r.APIRequests, 8))
	}

	fmt.Fprintln(w, "\nratios of wall_s (in brackets: of watch_s, the same measurement in both modes):")
	byKey := map[string]runResult{}
	var sizes []int
	for _, r := range runs {
		byKey[fmt.Sprint(r.N, r.Mode)] = r
		if !slices.Contains(sizes, r.N) {
			sizes = append(sizes, r.N)
		}
	}
	ratio := func(n int, a, b string) string {
		x, okx := byKey[fmt.Sprint(n, a)]
		y, oky := byKey[fmt.Sprint(n, b)]
		if !okx || !oky || y.WallS == 0 {
			return "-"
		}
		s := fmt.Sprintf("%.2f", x.WallS/y.WallS)
		if y.WatchS > 0 {
			s += fmt.Sprintf(" [%.2f]", x.WatchS/y.WatchS)
		}
		if !x.Complete || !y.Complete {
			s += " (partial)"
		}
		return s
	}
	for _, n := range sizes {
		fmt.Fprintf(w, "N=%d  provider/bare = %s   default-limiters/provider = %s\n", n,
			ratio(n, modeProvider, modeBare), ratio(n, modeDefault, modeProvider))
	}
}

func opt(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", x)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
