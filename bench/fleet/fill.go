package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

const (
	modeBare  = "bare"
	modeFleet = "fleet"
	// modeBareNodes is bare with the node side's apiserver load but no
	// provider: each node's status writes sent as that node's user, and
	// one spec.nodeName Pod watch per node, as that user, drained.
	modeBareNodes = "bare-nodes"
	// modeNullNodes is one bench/nullnode process per node, as that node's
	// user: the API work of N nodes and nothing else, their CPU included.
	modeNullNodes = "null-nodes"
	// modeNullClaim is null-nodes with one emulator per node: each minimal
	// node also claims each Pod's VM and commits it to a state file, the
	// floor of N nodes that claim.
	modeNullClaim = "null-nodes-claim"
	runLabel      = "fleet.vk-sandbox/run"
)

// fillResult is one fill: N x P Pods created at once, followed to Running.
type fillResult struct {
	Mode      string  `json:"mode"`
	Pods      int     `json:"pods"`
	Running   int     `json:"running"`
	Complete  bool    `json:"complete"`
	Errors    int64   `json:"errors"`
	LastError string  `json:"last_error,omitempty"`
	LoadAvg   string  `json:"loadavg_at_start"`
	CreatesS  float64 `json:"creates_done_s"` // first create call → last create acknowledged
	// WatchS is first create call → last Pod seen Running by watch, the
	// same measurement in both modes (the headline). StatusS (bare) is
	// first create → last UpdateStatus acknowledged.
	WatchS  float64 `json:"watch_wall_s"`
	StatusS float64 `json:"status_wall_s,omitempty"`
	// PerNodeS is first create → the node's (namespace's) last Pod Running.
	PerNodeS map[string]float64 `json:"per_node_s"`
	// CPU seconds over the fill by process name (podload.CPUDelta).
	CPU   map[string]float64 `json:"cpu_s"`
	API   apiWindow          `json:"api"`
	Curve []curvePoint       `json:"-"`
}

// curvePoint is the Running count per namespace at T seconds.
type curvePoint struct {
	T       float64
	Running map[string]int
}

// interleave orders the Pods round robin across nodes, so every node
// fills from the first second.
func interleave(perNode [][]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for j := range perNode[0] {
		for i := range perNode {
			out = append(out, perNode[i][j])
		}
	}
	return out
}

// fill creates P Pods in each namespace nss[i], bound to nodes[i], and
// waits until all are Running. Bare writes the Running status itself
// (podload.RunBare); fleet leaves it to the nodes.
func (f *fleet) fill(ctx context.Context, mode string, nss, nodes []string) (fillResult, error) {
	r := fillResult{Mode: mode, Pods: len(nss) * f.o.pods, LoadAvg: podload.LoadAvg(), PerNodeS: map[string]float64{}}
	labels := map[string]string{runLabel: mode}
	perNode := make([][]*corev1.Pod, len(nss))
	for i := range nss {
		perNode[i] = podload.SandboxPods(nss[i], nodes[i], f.o.pods, labels)
	}
	pods := interleave(perNode)
	t := podload.NewTracker(len(pods))
	stopWatch, err := podload.Watch(ctx, f.cs, "", metav1.ListOptions{LabelSelector: runLabel + "=" + mode}, t)
	if err != nil {
		return r, err
	}
	defer stopWatch()
	rctx, cancel := context.WithTimeout(ctx, f.o.timeout)
	defer cancel()

	var asNode map[string]kubernetes.Interface
	if mode == modeBareNodes {
		stop, clients, err := f.nodeSide(ctx, nss, nodes)
		if err != nil {
			return r, err
		}
		defer stop()
		asNode = clients
	}
	if mode == modeNullNodes || mode == modeNullClaim {
		stop, err := f.startNullNodes(ctx, nodes, mode == modeNullClaim)
		if err != nil {
			return r, err
		}
		defer stop()
	}
	api0, err := f.snap(ctx)
	if err != nil {
		return r, err
	}
	cpu0 := podload.CPUSnapshot()
	vk0 := f.nodeCPU()
	t0 := time.Now()
	curve := podload.Every(rctx, 250*time.Millisecond, func() curvePoint {
		return curvePoint{T: time.Since(t0).Seconds(), Running: t.RunningByNamespace()}
	})
	created := make(chan struct{})
	go func() {
		defer close(created)
		switch mode {
		case modeBare:
			podload.RunBare(rctx, f.cs, pods, f.o.workers, t)
		case modeBareNodes:
			podload.RunBareAs(rctx, f.cs, func(p *corev1.Pod) kubernetes.Interface { return asNode[p.Namespace] }, pods, f.o.workers, t)
		default:
			podload.CreateAll(rctx, f.cs, t, f.o.workers, pods, nil)
		}
	}()
	select {
	case <-t.Done():
		r.Complete = true
	case <-rctx.Done():
	}
	r.CPU = podload.CPUDelta(cpu0, podload.CPUSnapshot())
	vk1 := f.nodeCPU()
	api1, err := f.snap(ctx)
	if err != nil {
		return r, err
	}
	cancel()
	<-created
	r.Curve = curve()
	r.API = window(api0, api1, f.nodesIf(mode == modeFleet))
	for i := range f.nodesIf(mode == modeFleet) {
		f.res[i].CPUFillS = vk1[i] - vk0[i]
		f.res[i].CPUPerPodMs = 1000 * f.res[i].CPUFillS / float64(f.o.pods)
	}
	r.Running = t.Running()
	r.Errors, r.LastError = t.Errors()
	since := func(x time.Time) float64 {
		if x.IsZero() {
			return 0
		}
		return x.Sub(t0).Seconds()
	}
	var lastAck, lastRun, lastStatus time.Time
	lastByNS := map[string]time.Time{}
	for _, p := range t.Snapshot() {
		lastAck, lastStatus = later(lastAck, p.CreateAck), later(lastStatus, p.StatusAck)
		lastRun = later(lastRun, p.Running)
		lastByNS[p.Namespace] = later(lastByNS[p.Namespace], p.Running)
	}
	r.CreatesS, r.WatchS, r.StatusS = since(lastAck), since(lastRun), since(lastStatus)
	for i, ns := range nss {
		r.PerNodeS[nodes[i]] = since(lastByNS[ns])
	}
	if mode == modeFleet {
		for i := range f.nodes {
			f.res[i].FillS = r.PerNodeS[f.nodes[i].name]
		}
	}
	return r, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// cleanup deletes the Pods of the namespaces at once (grace 0). With no
// node serving them, they go at once.
func (f *fleet) cleanup(ctx context.Context, nss []string) {
	zero := int64(0)
	for _, ns := range nss {
		if err := f.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			logf("cleanup %s: %v", ns, err)
		}
	}
}

func namespaces(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// nodeSide opens, for each node i, a client as node i's user (returned by
// namespace nss[i]) and, as that user, the Pod watch a node holds
// (spec.nodeName=nodes[i], resumed when the apiserver closes it), feeding
// a tracker of its own that nothing reads.
func (f *fleet) nodeSide(ctx context.Context, nss, nodes []string) (stop func(), clients map[string]kubernetes.Interface, err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	clients = map[string]kubernetes.Interface{}
	for i, ns := range nss {
		cs, err := podload.Clientset(f.env.UserConfig(f.users[i].Token), f.o.contentType)
		if err != nil {
			stop()
			return nil, nil, err
		}
		clients[ns] = cs
		s, err := podload.Watch(ctx, cs, "", metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodes[i]}, podload.NewTracker(f.o.pods))
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("watch as %s: %w", f.users[i].Name, err)
		}
		stops = append(stops, s)
	}
	return stop, clients, nil
}

// startNullNodes starts one bench/nullnode per node, node i as node i's
// user, each Ready (its Pod cache synced) before it returns; with claim,
// each with an emulator of its own (-sandboxd).
func (f *fleet) startNullNodes(ctx context.Context, nodes []string, claim bool) (stop func(), err error) {
	if f.nullBin == "" {
		if f.nullBin, err = podload.BuildNullNode(ctx, f.dir); err != nil {
			return nil, err
		}
	}
	var started []*podload.NullNode
	var sims []*node
	stop = func() {
		for _, n := range started {
			if err := n.Stop(); err != nil {
				logf("nullnode exit: %v", err)
			}
		}
		for _, s := range sims {
			_ = s.stop()
		}
	}
	for i, name := range nodes {
		kc := filepath.Join(f.dir, name+".kubeconfig")
		if err := f.env.WriteKubeconfig(kc, f.users[i].Token); err != nil {
			stop()
			return nil, err
		}
		var extra []string
		if claim {
			s, err := f.startSim(name)
			if err != nil {
				stop()
				return nil, err
			}
			sims = append(sims, s)
			extra = podload.ClaimArgs(s.srv.URL, rootToken, filepath.Join(f.dir, name+".state"))
		}
		n, err := podload.StartNullNode(ctx, f.nullBin, kc, name, f.o.contentType, filepath.Join(f.dir, name+".log"), extra...)
		if err != nil {
			stop()
			return nil, err
		}
		started = append(started, n)
	}
	return stop, nil
}
