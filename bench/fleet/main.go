// Command fleet measures a fleet of virtual nodes on one real etcd +
// kube-apiserver (internal/kubetest): N vk-sandbox processes (the real binary,
// built once), each with its own sandboxd emulator (pool/sim) and its own
// node name and user, then P sandbox Pods per node created at once.
//
// In one run, in this order:
//
//	bare   the apiserver's own limit: the same N x P creates plus N x P
//	       status writes from this process (podload.RunBare), no provider
//	null-nodes  N bench/nullnode processes (minimal nodes) in place of the
//	       nodes: the floor of N nodes (off with -null-nodes=false)
//	null-nodes-claim  the same, each also claiming every Pod's VM at an
//	       emulator of its own and committing it to a state file: the floor
//	       of N nodes that claim (on with -null-nodes-claim)
//	nodes  N vk-sandbox processes start; the watches they open are counted
//	idle   -idle of nothing: requests per node from the apiserver's metrics
//	fleet  N x P Pods created at once; time until the last is Running
//	held   -idle-held of nothing, each node now holding P Pods
//
// Usage: go run ./bench/fleet [-nodes 20] [-pods 500] [-out FILE.json]
//
// It writes FILE.json (everything), FILE-fill.csv (Running per node over
// time), FILE-total.csv (Running over time, bare and fleet), FILE-nodes.csv
// (one row per node) and, with bench/plot, FILE-fill.svg and
// FILE-total.svg.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
)

type options struct {
	nodes, pods, workers int
	claimLatency         time.Duration
	idle, idleHeld       time.Duration
	timeout              time.Duration
	bare, inventory      bool
	bareAsNodes          bool
	nullNodes, nullClaim bool
	out                  string
	vkArgs, vkEnv        []string
	contentType          string
}

func parseOptions() *options {
	o := &options{}
	var vkArgs, vkEnv string
	flag.IntVar(&o.nodes, "nodes", 20, "virtual nodes (vk-sandbox processes)")
	flag.IntVar(&o.pods, "pods", 500, "sandbox Pods per node")
	flag.IntVar(&o.workers, "workers", 64, "concurrent create calls, for all nodes together (and status calls in bare)")
	flag.DurationVar(&o.claimLatency, "claim-latency", 500*time.Microsecond, "emulator claim latency")
	flag.DurationVar(&o.idle, "idle", 60*time.Second, "idle window after every node is Ready, before the fill")
	flag.DurationVar(&o.idleHeld, "idle-held", 60*time.Second, "idle window after the fill, each node holding its Pods (0: skip)")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "cap of one fill; a fill that hits it reports partial completion")
	flag.BoolVar(&o.inventory, "inventory", true, "nodes run with --publish-inventory, as the shipped DaemonSet does (the NodeInventory CRD is installed)")
	flag.BoolVar(&o.bareAsNodes, "bare-as-nodes", false, "also measure bare with the nodes' side of the load and no provider: status writes as each node's user, and one spec.nodeName Pod watch per node")
	flag.BoolVar(&o.nullNodes, "null-nodes", true, "also measure N bench/nullnode processes in place of the nodes (minimal nodes: each watches its Pods and writes each Running once, as its node's user): the floor of N nodes on this machine")
	flag.BoolVar(&o.nullClaim, "null-nodes-claim", false, "also measure N bench/nullnode processes that each claim every Pod's VM at an emulator of their own and commit it to a state file before writing it Running: the floor of N nodes that claim")
	flag.BoolVar(&o.bare, "bare", true, "also measure the bare apiserver limit (same creates and status writes, no provider)")
	flag.StringVar(&o.out, "out", "bench/results/fleet-"+time.Now().Format("2006-01-02T150405")+".json", "results JSON; the CSVs and SVGs go beside it")
	flag.StringVar(&o.contentType, "content-type", podload.DefaultContentType, podload.ContentTypeFlagUsage)
	flag.StringVar(&vkArgs, "vk-args", "", "extra vk-sandbox flags for every node, space separated (e.g. \"--publish-inventory\")")
	flag.StringVar(&vkEnv, "vk-env", "", "extra environment of every vk-sandbox only, space separated (e.g. \"GOMAXPROCS=1\")")
	flag.Parse()
	o.vkArgs, o.vkEnv = strings.Fields(vkArgs), strings.Fields(vkEnv)
	return o
}

func main() {
	o := parseOptions()
	var err error
	if o.nodes <= 0 || o.pods <= 0 {
		err = errors.New("-nodes and -pods must be positive")
	}
	podload.Main("fleet", err, func(ctx context.Context) error { return run(ctx, o) })
}

var logf = podload.Logf

// fleet is one run's shared state.
type fleet struct {
	o       *options
	env     *kubetest.Env
	cs      kubernetes.Interface
	users   []kubetest.User
	vkBin   string
	nullBin string // built on first use
	dir     string
	nodes   []*node
	res     []nodeResult // parallel to nodes
}

// nodeResult is one node's row.
type nodeResult struct {
	Name        string  `json:"name"`
	FillS       float64 `json:"fill_s"` // first create → the node's last Pod Running
	CPUFillS    float64 `json:"cpu_fill_s"`
	CPUPerPodMs float64 `json:"cpu_ms_per_pod"`
	CPUIdleMsS  float64 `json:"cpu_idle_ms_per_s"`
	PeakRSSMiB  float64 `json:"peak_rss_mib"`
	IdleReqS    float64 `json:"idle_requests_per_s"`
	HeldReqS    float64 `json:"held_requests_per_s,omitempty"`
	FillReqs    int     `json:"fill_requests"`
	Claims      int64   `json:"claims"`
	Exit        string  `json:"exit"`
}

type report struct {
	Started      time.Time   `json:"started"`
	GoVersion    string      `json:"go_version"`
	NumCPU       int         `json:"num_cpu"`
	Command      string      `json:"command"`
	Nodes        int         `json:"nodes"`
	PodsPerNode  int         `json:"pods_per_node"`
	ClaimLatency string      `json:"claim_latency"`
	Workers      int         `json:"workers"`
	VKArgs       []string    `json:"vk_args,omitempty"`
	VKEnv        []string    `json:"vk_env,omitempty"`
	ContentType  string      `json:"content_type"`
	Bare         *fillResult `json:"bare,omitempty"`
	BareNodes    *fillResult `json:"bare_as_nodes,omitempty"`
	NullNodes    *fillResult `json:"null_nodes,omitempty"`
	NullClaim    *fillResult `json:"null_nodes_claim,omitempty"`
	Fleet        *fillResult `json:"fleet,omitempty"`
	Ratio        float64     `json:"fleet_over_bare,omitempty"`           // of watch_wall_s
	RatioNull    float64     `json:"fleet_over_null_nodes,omitempty"`     // of watch_wall_s
	CPURatioNull float64     `json:"cpu_fleet_over_null_nodes,omitempty"` // the nodes' CPU per Pod
	// The same against null-nodes-claim.
	RatioNullClaim    float64            `json:"fleet_over_null_nodes_claim,omitempty"`
	CPURatioNullClaim float64            `json:"cpu_fleet_over_null_nodes_claim,omitempty"`
	StartS            float64            `json:"nodes_ready_s"`    // all N started → all Ready
	WatchesNode       map[string]float64 `json:"watches_per_node"` // by resource
	Start             apiWindow          `json:"start"`            // nodes starting, Ready, and 5 s more
	Idle              apiWindow          `json:"idle"`
	Held              *apiWindow         `json:"held,omitempty"`
	// EventsTailS is how long after the last Pod was Running the nodes
	// went on creating Events (the held window starts after them).
	EventsTailS float64      `json:"events_tail_s"`
	PerNode     []nodeResult `json:"per_node"`
}

func (f *fleet) nodesIf(ok bool) []*node {
	if !ok {
		return nil
	}
	return f.nodes
}

// nodeCPU is each node's CPU seconds so far (utime+stime).
func (f *fleet) nodeCPU() []float64 {
	out := make([]float64, len(f.nodes))
	for i, n := range f.nodes {
		_, _, out[i], _ = podload.ProcStat(n.pid())
	}
	return out
}

func run(ctx context.Context, o *options) error {
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f := &fleet{o: o, dir: dir, users: users(o.nodes), vkBin: filepath.Join(dir, "vk-sandbox")}
	logf("building ./cmd/vk-sandbox")
	if err := kubetest.BuildVKSandbox(ctx, f.vkBin, false); err != nil {
		return err
	}
	if f.env, err = kubetest.Start(ctx, kubetest.Options{Logf: logf, Users: f.users, Dir: filepath.Join(dir, "kubetest")}); err != nil {
		return err
	}
	defer f.env.Stop()
	if f.cs, err = podload.Clientset(f.env.Config, o.contentType); err != nil {
		return err
	}
	if err := setupIdentities(ctx, f.cs, o.nodes); err != nil {
		return err
	}
	if o.inventory {
		if err := f.env.InstallCRDs(ctx, "manifests/test/nodeinventory-crd.yaml"); err != nil {
			return err
		}
		o.vkArgs = append([]string{"--publish-inventory"}, o.vkArgs...)
	}
	rep := &report{Started: time.Now(), GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(),
		Command: strings.Join(os.Args[1:], " "), Nodes: o.nodes, PodsPerNode: o.pods,
		ClaimLatency: o.claimLatency.String(), Workers: o.workers, VKArgs: o.vkArgs, VKEnv: o.vkEnv, ContentType: o.contentType}
	defer f.stopNodes(rep)
	if err := f.phases(ctx, rep); err != nil {
		return err
	}
	f.stopNodes(rep)
	return f.write(rep)
}

// phases runs bare, then starts the nodes, measures them idle, fills them
// and measures them idle again.
func (f *fleet) phases(ctx context.Context, rep *report) error {
	o := f.o
	names := make([]string, o.nodes)
	for i := range names {
		names[i] = nodeName(i)
	}
	if err := createNamespaces(ctx, f.cs, slices.Concat(namespaces(modeBare, o.nodes), namespaces(modeBareNodes, o.nodes), namespaces(modeNullNodes, o.nodes), namespaces(modeNullClaim, o.nodes), namespaces(modeFleet, o.nodes))); err != nil {
		return err
	}
	// Each bare phase: the same Pods, bound to nodes that do not exist (in
	// null-nodes, names that only a bench/nullnode watches).
	for _, b := range []struct {
		on   bool
		mode string
		into **fillResult
	}{{o.bare, modeBare, &rep.Bare}, {o.bareAsNodes, modeBareNodes, &rep.BareNodes}, {o.nullNodes, modeNullNodes, &rep.NullNodes}, {o.nullClaim, modeNullClaim, &rep.NullClaim}} {
		if !b.on {
			continue
		}
		fake := make([]string, o.nodes)
		for i := range fake {
			fake[i] = b.mode + "-nonode-" + names[i]
		}
		var err error
		if *b.into, err = f.fillLogged(ctx, b.mode, namespaces(b.mode, o.nodes), fake); err != nil {
			return err
		}
		f.cleanup(ctx, namespaces(b.mode, o.nodes))
	}

	before, err := f.snap(ctx)
	if err != nil {
		return err
	}
	logf("starting %d vk-sandbox nodes", o.nodes)
	start := time.Now()
	for i := range o.nodes {
		n, err := f.startNode(i)
		if err != nil {
			return err
		}
		f.nodes = append(f.nodes, n)
		f.res = append(f.res, nodeResult{Name: n.name})
	}
	var g errgroup.Group
	for _, n := range f.nodes {
		g.Go(func() error { return n.waitReady(ctx, f) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	rep.StartS = time.Since(start).Seconds()
	logf("all %d nodes Ready in %.1fs; settling 5s", o.nodes, rep.StartS)
	if err := sleep(ctx, 5*time.Second); err != nil {
		return err
	}

	idle, err := f.idleWindow(ctx, o.idle, func(i int, w apiWindow, cpuMsS float64) {
		f.res[i].IdleReqS = float64(w.PerNode[f.nodes[i].name]) / w.Seconds
		f.res[i].CPUIdleMsS = cpuMsS
	})
	if err != nil {
		return err
	}
	rep.Idle = idle.w
	rep.Start = window(before, idle.first, f.nodes)
	rep.WatchesNode = map[string]float64{}
	for k, v := range watchDelta(before, idle.first) {
		rep.WatchesNode[k] = v / float64(o.nodes)
	}

	r, err := f.fillLogged(ctx, modeFleet, namespaces("fleet", o.nodes), names)
	if err != nil {
		return err
	}
	rep.Fleet = r
	for i, n := range f.nodes {
		f.res[i].FillReqs = r.API.PerNode[n.name]
	}
	rep.setRatios()
	if rep.EventsTailS, err = f.eventsSettle(ctx); err != nil {
		return err
	}
	if o.idleHeld > 0 {
		held, err := f.idleWindow(ctx, o.idleHeld, func(i int, w apiWindow, _ float64) {
			f.res[i].HeldReqS = float64(w.PerNode[f.nodes[i].name]) / w.Seconds
		})
		if err != nil {
			return err
		}
		rep.Held = &held.w
	}
	return nil
}

// fillLogged is fill with a log line before and after.
func (f *fleet) fillLogged(ctx context.Context, mode string, nss, nodes []string) (*fillResult, error) {
	logf("%s: %d x %d Pods", mode, len(nss), f.o.pods)
	r, err := f.fill(ctx, mode, nss, nodes)
	if err != nil {
		return nil, err
	}
	logf("%s: %d/%d Running in %.2fs (errors %d %s)", mode, r.Running, r.Pods, r.WatchS, r.Errors, r.LastError)
	return &r, nil
}

// eventsSettle waits until no Event has been created for 3 s (at most
// 2 min) and returns how long it waited, less those 3 s.
func (f *fleet) eventsSettle(ctx context.Context) (float64, error) {
	start := time.Now()
	last, quiet := -1.0, time.Now()
	for time.Since(start) < 2*time.Minute {
		s, err := f.snap(ctx)
		if err != nil {
			return 0, err
		}
		if n := s.byVerb["POST events"]; n != last {
			last, quiet = n, time.Now()
		} else if time.Since(quiet) >= 3*time.Second {
			return quiet.Sub(start).Seconds(), nil
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return time.Since(start).Seconds(), nil
}

type idleResult struct {
	first apiSnap
	w     apiWindow
}

// idleWindow scrapes, waits d doing nothing, scrapes again, and hands
// each node its share.
func (f *fleet) idleWindow(ctx context.Context, d time.Duration, each func(i int, w apiWindow, cpuMsPerS float64)) (idleResult, error) {
	logf("idle: %s", d)
	a, err := f.snap(ctx)
	if err != nil {
		return idleResult{}, err
	}
	cpu0 := f.nodeCPU()
	if err := sleep(ctx, d); err != nil {
		return idleResult{}, err
	}
	cpu1 := f.nodeCPU()
	b, err := f.snap(ctx)
	if err != nil {
		return idleResult{}, err
	}
	w := window(a, b, f.nodes)
	for i := range f.nodes {
		each(i, w, 1000*(cpu1[i]-cpu0[i])/w.Seconds)
	}
	logf("idle: per node %.3f req/s (min %.3f, max %.3f), LISTs %d; %s",
		w.PerNodeRate.Mean, w.PerNodeRate.Min, w.PerNodeRate.Max, w.Lists, podload.Top(w.ByVerb, 8))
	return idleResult{first: a, w: w}, nil
}

// stopNodes reads each node's peak RSS and claims, then stops it.
// Idempotent.
func (f *fleet) stopNodes(rep *report) {
	for i, n := range f.nodes {
		if n.vk == nil {
			continue
		}
		f.res[i].PeakRSSMiB = float64(podload.PeakRSS(n.pid())) / (1 << 20)
		f.res[i].Claims = n.sim.Counters()["claim_ok"]
		if err := n.stop(); err != nil {
			f.res[i].Exit = err.Error()
			logf("%s exit: %v", n.name, err)
		} else {
			f.res[i].Exit = "0"
		}
	}
	rep.PerNode = f.res
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
