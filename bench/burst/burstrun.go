package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

// run does one burst of n Pods in mode in a fresh namespace.
func (b *bench) run(ctx context.Context, n int, mode string) (runResult, []podRec) {
	b.seq++
	r := runResult{N: n, Mode: mode, LoadAvg: podload.LoadAvg()}
	failed := func(err error) (runResult, []podRec) { r.LastError = err.Error(); r.Errors++; return r, nil }
	ns, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("burst-%d-", n)}}, metav1.CreateOptions{})
	if err != nil {
		return failed(err)
	}
	r.Namespace = ns.Name
	defer b.cleanup(r.Namespace)

	var node *vkNode
	if mode == modeNull || mode == modeNullClaim {
		r.Node = fmt.Sprintf("burst-null-%d-%d", os.Getpid(), b.seq)
		var extra []string
		if mode == modeNullClaim {
			if node, err = startSim(nodeOpts{name: r.Node, n: n, claimLatency: b.o.claimLatency}); err != nil {
				return failed(err)
			}
			defer node.stop()
			node.state = filepath.Join(b.dir, r.Node+".state")
			extra = podload.ClaimArgs(node.srv.URL, rootToken, node.state)
		}
		nn, err := podload.StartNullNode(ctx, b.nullBin, b.env.Kubeconfig, r.Node, b.o.contentType, filepath.Join(b.dir, r.Node+".log"), extra...)
		if err != nil {
			return failed(err)
		}
		defer func() {
			if err := nn.Stop(); err != nil {
				logf("nullnode exit: %v", err)
			}
		}()
	}
	if isProvider(mode) {
		r.Node = fmt.Sprintf("burst-vk-%d-%d", os.Getpid(), b.seq)
		dir := filepath.Join(b.dir, r.Node)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return failed(err)
		}
		bin := b.vkBin
		if alt, ok := b.o.vkBins[mode]; ok {
			bin = alt
		}
		no := nodeOpts{
			bin: bin, kubeconfig: b.env.Kubeconfig, dir: dir, name: r.Node, n: n,
			claimLatency: b.o.claimLatency, api: b.o.sandboxdAPI, loseAnswers: b.o.loseAnswers, metrics: b.o.metrics,
			extraArgs: b.o.vkArgs,
			env:       b.o.vkEnv,
		}
		if mode == modeDefault {
			node, err = startInProcess(ctx, b.cs, b.env.Config, no)
		} else {
			node, err = startVK(ctx, b.cs, no)
		}
		if err != nil {
			return failed(err)
		}
		defer node.stop()
	}

	t := podload.NewTracker(n)
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
	if b.o.allocs != "" && node != nil {
		node.saveAllocs(b.o.allocs, fmt.Sprintf("%d-%s-allocs-before", n, mode))
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
			podload.RunBare(rctx, b.cs, podload.SandboxPods(r.Namespace, "burst-bare-nonode", n, nil), b.o.workers, t)
		} else {
			podload.CreateAll(rctx, b.cs, t, b.o.workers, podload.SandboxPods(r.Namespace, r.Node, n, nil), nil)
		}
	}()
	select {
	case <-t.Done():
		r.Complete = true
	case <-rctx.Done():
		r.TimedOut = ctx.Err() == nil
	}
	r.CPU = cpuDelta(cpu0, cpuSnapshot())
	r.APIRequests = requestDelta(req0, apiRequests(ctx, b.cs))
	if stopPerf != nil {
		stopPerf()
	}
	if b.o.allocs != "" && node != nil {
		node.saveAllocs(b.o.allocs, fmt.Sprintf("%d-%s-allocs-after", n, mode))
	}
	<-created
	cancel()
	stopWatch()
	r.Timeline = timeline()
	if maxQueue != nil {
		r.MaxQueue = maxQueue()
	}
	r.Running = t.Running()
	r.ClaimAnn = t.ClaimAnnotated()
	r.Rewatches = t.Rewatches()
	if errs, last := t.Errors(); errs > 0 {
		r.Errors, r.LastError = errs, last
	}

	pods := t.Snapshot()
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
		if b.o.sandboxdAPI != "" || b.o.loseAnswers > 0 {
			r.Sandboxd = node.sandboxdFigures(cmp.Or(b.o.sandboxdAPI, "newest"), t.Running())
			s := r.Sandboxd
			logf("sandboxd %s, lost answers %d: Pods Running %d/%d, VMs held %d, Pods with two VMs %d, VMs leaked %d, full listings %d",
				s.API, s.LostAnswers, t.Running(), n, s.VMsHeld, s.PodsWithTwoVMs, s.VMsLeaked, s.FullListings)
		}
		ct := node.claimTimes()
		for i := range pods {
			pods[i].Claimed = ct[r.Namespace+"/"+pods[i].Name]
		}
		if err := node.stop(); err != nil {
			r.VKExit = err.Error()
			logf("vk-sandbox exit: %v", err)
			if node.vk != nil {
				logf("log tail:\n%s", node.vk.Tail(20))
			}
		} else {
			r.VKExit = "0"
		}
		r.Claims = node.sim.Counters()["claim_ok"]
		r.ClaimsOK = r.Claims == int64(n)
		// A lost answer on a server that cannot hand its token back (V1)
		// costs a second claim by design: there the figures above judge.
		if !r.ClaimsOK && r.Sandboxd == nil {
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

// sampleQueueDepth scrapes vk-sandbox every 250 ms until ctx ends and sums
// its shards' vksandbox_queue_depth; the returned func waits for the end
// and gives the peak.
func sampleQueueDepth(ctx context.Context, v *vkNode) func() float64 {
	depths := podload.Every(ctx, 250*time.Millisecond, func() float64 {
		body, err := v.scrape()
		if err != nil {
			return 0
		}
		samples, err := podload.ParseMetrics(body)
		if err != nil {
			return 0
		}
		all := func(map[string]string) string { return "all" }
		return podload.Sum(samples, "vksandbox_queue_depth", all)["all"]
	})
	return func() float64 { return slices.Max(append(depths(), 0)) }
}
