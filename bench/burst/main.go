// Command burst measures a burst of sandbox Pods end to end against one
// real etcd + kube-apiserver (internal/kubetest): N Pods created at once, and
// the time until the last is Running with a podIP, observed by watch.
//
// Modes, each in a fresh namespace:
//
//	bare                       the apiserver's own limit: N creates plus N
//	                           status updates from this process, no provider
//	provider                   the vk-sandbox binary with the in-process
//	                           emulator (pool/sim) as sandboxd
//	null-node                  bench/nullnode in place of vk-sandbox: the
//	                           minimal node (one watch, one status write
//	                           per Pod), the floor of any node
//	null-node-claim            bench/nullnode with the emulator: the minimal
//	                           node plus one claim exchange and one fsynced
//	                           state-file commit per Pod, the floor of any
//	                           node that claims
//	provider-default-limiters  the provider run in this process (kube.NewDaemon)
//	                           with virtual-kubelet's 10 qps / burst 100 queues,
//	                           an option only the library has
//	provider-NAME              a prebuilt vk-sandbox binary named with
//	                           -vk-bins NAME=PATH (another tree's build), so
//	                           that before and after run interleaved on one
//	                           control plane
//
// The table ends with the ratios of one run's modes: provider / null-node
// beside provider / bare, and provider / null-node-claim when it ran
// (also in FILE.json, "ratios").
//
// Usage: go run ./bench/burst [-n 100,1000] [-modes ...] [-out FILE.json]
//
// It writes FILE.json (every run, with a progress timeline) and FILE.csv
// (one row per Pod; bench/plot -cdf draws its latency CDF).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
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
	allocs       string
	settle       time.Duration
	vkArgs       []string
	vkEnv        []string
	contentType  string
	sandboxdAPI  string
	loseAnswers  float64
	// vkBins maps a mode "provider-NAME" to a prebuilt vk-sandbox binary
	// (-vk-bins NAME=PATH): another tree's build, run in the same
	// invocation for interleaved before/after figures.
	vkBins map[string]string
}

func parseOptions() (*options, error) {
	o := &options{}
	var sizes, modes, vkArgs, vkEnv, vkBins string
	flag.StringVar(&sizes, "n", "100,1000", "comma-separated burst sizes")
	flag.StringVar(&modes, "modes", strings.Join([]string{modeBare, modeProvider, modeNull, modeDefault}, ","), "comma-separated modes: bare, provider, null-node (bench/nullnode, a minimal node that only watches its Pods and writes each Running once: the floor of a node's time and CPU per Pod), provider-default-limiters, null-node-claim (null-node plus one claim at the emulator and one fsynced state-file commit per Pod: the floor of a node that claims)")
	flag.DurationVar(&o.claimLatency, "claim-latency", 500*time.Microsecond, "emulator claim latency (sim.Config.ClaimLatency)")
	flag.StringVar(&o.out, "out", "bench/results/burst-"+time.Now().Format("2006-01-02T150405")+".json", "results JSON; the per-Pod CSV goes beside it with a .csv extension")
	flag.BoolVar(&o.keep, "keep", false, "leave the control plane up after the runs, print KUBECONFIG, wait for ^C")
	flag.IntVar(&o.workers, "workers", 64, "concurrent create calls (and status calls in bare)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "cap of one run; a run that hits it reports partial completion")
	flag.IntVar(&o.warmup, "warmup", 50, "Pods of an unrecorded bare run first, to warm the apiserver (0: none)")
	flag.BoolVar(&o.metrics, "metrics", false, "expose vk-sandbox /metrics on a loopback port, sample its queue depth during each run and save the final scrape beside -out")
	flag.StringVar(&o.allocs, "allocs", "", "directory: save vk-sandbox's allocation profile (/debug/pprof/allocs) before and after each burst there, <N>-<mode>-allocs-{before,after}.pb.gz (implies -metrics; compare with go tool pprof -sample_index=alloc_space -base BEFORE AFTER)")
	flag.StringVar(&o.perf, "perf", "", "directory: record perf call graphs (perf record -g) of vk-sandbox, the minimal node and kube-apiserver during each burst there (needs perf, root)")
	flag.DurationVar(&o.settle, "settle", 0, "after each provider burst, wait this long before stopping vk-sandbox and count the Events again (are they late or lost?)")
	flag.StringVar(&o.sandboxdAPI, "sandboxd-api", "", "the emulator's sandboxd API version, V1..V5 (empty: the newest); the run then reports lost answers, full listings, VMs held and leaked")
	flag.Float64Var(&o.loseAnswers, "lose-answers", 0, "fraction of claims whose answer the emulator loses after making the VM (0..1)")
	flag.StringVar(&o.contentType, "content-type", podload.DefaultContentType, podload.ContentTypeFlagUsage)
	flag.StringVar(&vkEnv, "vk-env", "", "extra environment of vk-sandbox only, space separated (e.g. \"GOGC=400\")")
	flag.StringVar(&vkArgs, "vk-args", "", "extra vk-sandbox flags, space separated (e.g. \"--kube-api-qps 1000 --kube-api-burst 2000\")")
	flag.StringVar(&vkBins, "vk-bins", "", "comma-separated NAME=PATH: each adds a mode provider-NAME that runs the prebuilt vk-sandbox binary PATH in place of this tree's (e.g. \"before=/tmp/vk-before\"; list provider-before in -modes)")
	flag.Parse()
	o.vkBins = map[string]string{}
	for kv := range strings.SplitSeq(vkBins, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, path, ok := strings.Cut(kv, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("-vk-bins: %q is not NAME=PATH", kv)
		}
		o.vkBins[modeProvider+"-"+name] = path
	}
	for s := range strings.SplitSeq(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-n: %q is not a positive integer", s)
		}
		o.sizes = append(o.sizes, n)
	}
	for m := range strings.SplitSeq(modes, ",") {
		m = strings.TrimSpace(m)
		if _, alt := o.vkBins[m]; !alt && m != modeBare && m != modeProvider && m != modeDefault && m != modeNull && m != modeNullClaim {
			return nil, fmt.Errorf("-modes: unknown mode %q", m)
		}
		o.modes = append(o.modes, m)
	}
	o.vkArgs = strings.Fields(vkArgs)
	if o.allocs != "" {
		o.metrics = true
		o.vkArgs = append(o.vkArgs, "--profiling")
	}
	o.vkEnv = strings.Fields(vkEnv)
	return o, nil
}

func main() {
	o, err := parseOptions()
	podload.Main("burst", err, func(ctx context.Context) error { return run(ctx, o) })
}

var logf = podload.Logf

type report struct {
	Started      time.Time   `json:"started"`
	GoVersion    string      `json:"go_version"`
	NumCPU       int         `json:"num_cpu"`
	ClaimLatency string      `json:"claim_latency"`
	Workers      int         `json:"workers"`
	VKArgs       []string    `json:"vk_args,omitempty"`
	ContentType  string      `json:"content_type"`
	VKEnv        []string    `json:"vk_env,omitempty"`
	Runs         []runResult `json:"runs"`
	Ratios       []ratios    `json:"ratios"`
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
	// Sandboxd: with -sandboxd-api or -lose-answers, what the node held.
	Sandboxd *sandboxdRun `json:"sandboxd,omitempty"`
	ClaimAnn int          `json:"running_with_claim_id_annotation"`
	// Rewatches: the harness's own watch was ended by the apiserver (it fell
	// behind) and reopened this many times.
	Rewatches int64 `json:"harness_rewatches"`
	Events    int   `json:"events"` // Events in the namespace when the last Pod was Running
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
	LatClient         podload.Stats `json:"lat_client"`
	LatCreationTS     podload.Stats `json:"lat_creation_ts"`
	LatCreateCall     podload.Stats `json:"lat_create_call"`
	LatAckToSeen      podload.Stats `json:"lat_ack_to_seen"` // create acknowledged → first watch event (apiserver watch delivery)
	LatAckToClaim     podload.Stats `json:"lat_ack_to_claim,omitzero"`
	LatClaimToRunning podload.Stats `json:"lat_claim_to_running,omitzero"`
	Timeline          []sample      `json:"timeline"`
}

type bench struct {
	o       *options
	env     *kubetest.Env
	cs      kubernetes.Interface
	vkBin   string
	nullBin string
	dir     string
	seq     int
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
	if slices.Contains(o.modes, modeNull) || slices.Contains(o.modes, modeNullClaim) {
		logf("building ./bench/nullnode")
		if b.nullBin, err = podload.BuildNullNode(ctx, dir); err != nil {
			return err
		}
	}
	if slices.ContainsFunc(o.modes, isProvider) {
		b.vkBin = filepath.Join(dir, "vk-sandbox")
		logf("building ./cmd/vk-sandbox")
		if err := kubetest.BuildVKSandbox(ctx, b.vkBin, false); err != nil {
			return err
		}
	}
	env, err := kubetest.Start(ctx, kubetest.Options{Logf: logf})
	if err != nil {
		return err
	}
	defer env.Stop()
	b.env = env
	if b.cs, err = podload.Clientset(env.Config, o.contentType); err != nil {
		return err
	}

	if o.warmup > 0 {
		logf("warm-up: unrecorded bare run of %d Pods", o.warmup)
		if r, _ := b.run(ctx, o.warmup, modeBare); !r.Complete {
			return fmt.Errorf("warm-up failed: %d/%d Running, %s", r.Running, r.N, r.LastError)
		}
	}
	rep := report{Started: time.Now(), GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(),
		ClaimLatency: o.claimLatency.String(), Workers: o.workers, VKArgs: o.vkArgs, VKEnv: o.vkEnv, ContentType: o.contentType}
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
			rep.Ratios = runRatios(rep.Runs)
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
