package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

func createNamespaces(ctx context.Context, cs kubernetes.Interface, names []string) error {
	for _, n := range names {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", n, err)
		}
	}
	return nil
}

// beside is the output path with suffix in place of .json.
func (f *fleet) beside(suffix string) string { return strings.TrimSuffix(f.o.out, ".json") + suffix }

func f3(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

// write saves the JSON, the CSVs and the plots, and prints the tables.
func (f *fleet) write(rep *report) error {
	if err := podload.WriteJSON(f.o.out, rep); err != nil {
		return err
	}
	var perNode, total [][]string
	for _, r := range []*fillResult{rep.Bare, rep.BareNodes, rep.NullNodes, rep.NullClaim, rep.Fleet} {
		if r == nil {
			continue
		}
		for _, p := range r.Curve {
			sum := 0
			for _, ns := range slices.Sorted(maps.Keys(p.Running)) {
				sum += p.Running[ns]
				if r.Mode == modeFleet {
					perNode = append(perNode, []string{ns, f3(p.T), strconv.Itoa(p.Running[ns])})
				}
			}
			total = append(total, []string{r.Mode, f3(p.T), strconv.Itoa(sum)})
		}
	}
	var nodes [][]string
	for _, n := range rep.PerNode {
		nodes = append(nodes, []string{n.Name, f3(n.FillS), f3(n.CPUFillS), f3(n.CPUPerPodMs), f3(n.CPUIdleMsS),
			f3(n.PeakRSSMiB), f3(n.IdleReqS), f3(n.HeldReqS), strconv.Itoa(n.FillReqs), strconv.FormatInt(n.Claims, 10), n.Exit})
	}
	for _, c := range []struct {
		path   string
		header []string
		rows   [][]string
	}{
		{f.beside("-fill.csv"), []string{"node", "t_s", "running"}, perNode},
		{f.beside("-total.csv"), []string{"mode", "t_s", "running"}, total},
		{f.beside("-nodes.csv"), []string{"node", "fill_s", "cpu_fill_s", "cpu_ms_per_pod", "cpu_idle_ms_per_s", "peak_rss_mib",
			"idle_requests_per_s", "held_requests_per_s", "fill_requests", "claims", "exit"}, nodes},
	} {
		if err := podload.WriteCSV(c.path, c.header, c.rows); err != nil {
			return err
		}
	}
	printTables(os.Stdout, rep)
	title := fmt.Sprintf("%d nodes x %d Pods", rep.Nodes, rep.PodsPerNode)
	plot(f.beside("-fill.csv"), "node", title+": Running per node")
	plot(f.beside("-total.csv"), "mode", title+": Running, fleet vs bare")
	fmt.Printf("\nresults: %s (+ -fill.csv, -total.csv, -nodes.csv, -fill.svg, -total.svg)\n", f.o.out)
	return nil
}

// plot draws a CSV's Running-over-time lines with bench/plot.
func plot(in, series, title string) {
	out := strings.TrimSuffix(in, ".csv") + ".svg"
	c := exec.Command("go", "run", "./bench/plot", "-in", in, "-out", out, "-x", "t_s", "-y", "running",
		"-series", series, "-title", title, "-xlabel", "seconds since the first create", "-ylabel", "Pods Running")
	c.Stderr = os.Stderr
	if err := c.Run(); err != nil {
		logf("plot %s: %v", in, err)
	}
}

// setRatios sets the fleet's ratios to the bare and null-nodes fills of
// the same run.
func (rep *report) setRatios() {
	r := rep.Fleet
	if rep.Bare != nil && rep.Bare.WatchS > 0 {
		rep.Ratio = r.WatchS / rep.Bare.WatchS
	}
	rep.RatioNull, rep.CPURatioNull = fleetOver(r, rep.NullNodes)
	rep.RatioNullClaim, rep.CPURatioNullClaim = fleetOver(r, rep.NullClaim)
}

// fleetOver is the fleet's last Running over z's, and its nodes' CPU over
// z's; 0 where z was not run.
func fleetOver(fleet, z *fillResult) (wall, cpu float64) {
	if z == nil || z.WatchS == 0 {
		return 0, 0
	}
	if c := podload.NodeCPU(z.CPU); c > 0 {
		cpu = podload.NodeCPU(fleet.CPU) / c
	}
	return fleet.WatchS / z.WatchS, cpu
}

// over is a's last Running by watch over b's, "-" when either is missing.
func over(a, b *fillResult) string {
	if a == nil || b == nil || b.WatchS == 0 {
		return "-"
	}
	s := fmt.Sprintf("%.2f", a.WatchS/b.WatchS)
	if !a.Complete || !b.Complete {
		s += " (partial)"
	}
	return s
}

func printTables(w io.Writer, rep *report) {
	fmt.Fprintf(w, "\n%d nodes x %d Pods (%d), %d create workers, claim latency %s\n", rep.Nodes, rep.PodsPerNode, rep.Nodes*rep.PodsPerNode, rep.Workers, rep.ClaimLatency)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tdone\tcreates_s\tlast_running_s\tstatus_s\tkube-apiserver_cpu_s\tetcd_cpu_s\tnode_cpu_s\tharness_cpu_s\tother_cpu_s\tloadavg\t")
	for _, r := range []*fillResult{rep.Bare, rep.BareNodes, rep.NullNodes, rep.NullClaim, rep.Fleet} {
		if r == nil {
			continue
		}
		done := fmt.Sprintf("%d/%d", r.Running, r.Pods)
		if !r.Complete {
			done += " PARTIAL"
		}
		c := r.CPU
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t\n", r.Mode, done, r.CreatesS, r.WatchS, r.StatusS,
			c["kube-apiserver"], c["etcd"], podload.NodeCPU(c), c["harness"], c["other"], r.LoadAvg)
	}
	tw.Flush()
	fmt.Fprintf(w, "fleet / null-nodes = %s   fleet / bare = %s   null-nodes / bare = %s   (last Running by watch; null-nodes: minimal nodes, the floor)\n",
		over(rep.Fleet, rep.NullNodes), over(rep.Fleet, rep.Bare), over(rep.NullNodes, rep.Bare))
	if b := rep.BareNodes; b != nil {
		fmt.Fprintf(w, "fleet / bare-nodes (last Running by watch) = %s\n", over(rep.Fleet, b))
	}
	if z := rep.NullNodes; z != nil && rep.Fleet != nil && rep.CPURatioNull > 0 {
		fmt.Fprintf(w, "node CPU per Pod: fleet / null-nodes = %.2f (%.3f / %.3f ms per Pod per node)\n", rep.CPURatioNull,
			1000*podload.NodeCPU(rep.Fleet.CPU)/float64(rep.Fleet.Pods), 1000*podload.NodeCPU(z.CPU)/float64(z.Pods))
	}
	if z := rep.NullClaim; z != nil && rep.Fleet != nil && rep.CPURatioNullClaim > 0 {
		fmt.Fprintf(w, "fleet / null-nodes-claim = %s   null-nodes-claim / null-nodes = %s   node CPU per Pod: fleet / null-nodes-claim = %.2f (%.3f / %.3f ms per Pod per node)\n",
			over(rep.Fleet, z), over(z, rep.NullNodes), rep.CPURatioNullClaim,
			1000*podload.NodeCPU(rep.Fleet.CPU)/float64(rep.Fleet.Pods), 1000*podload.NodeCPU(z.CPU)/float64(z.Pods))
	}
	fmt.Fprintf(w, "Events went on %.1fs after the last Pod was Running\n", rep.EventsTailS)
	fmt.Fprintf(w, "\nnodes Ready %.1fs after the first started; watches opened per node: %v\n", rep.StartS, rep.WatchesNode)
	windows := []struct {
		name string
		w    *apiWindow
	}{{"start", &rep.Start}, {"idle", &rep.Idle}, {"held", rep.Held}}
	if rep.Fleet != nil {
		windows = append(windows, struct {
			name string
			w    *apiWindow
		}{"fill", &rep.Fleet.API})
	}
	fmt.Fprintln(w, "\napiserver requests (from its /metrics): per node from each node's FlowSchema, by verb from apiserver_request_total less selfrequest (every client)")
	for _, x := range windows {
		if x.w == nil {
			continue
		}
		r := x.w.PerNodeRate
		fmt.Fprintf(w, "  %s (%.0fs): per node %.3f req/s (min %.3f, max %.3f); LISTs %d; %s\n", x.name, x.w.Seconds, r.Mean, r.Min, r.Max, x.w.Lists, podload.Top(x.w.ByVerb, 10))
	}

	fmt.Fprintln(w, "\nper node:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\tfill_s\tcpu_ms/pod\tidle_cpu_ms/s\tpeak_rss_MiB\tidle_req/s\theld_req/s\tfill_reqs\tclaims\texit\t")
	for _, n := range rep.PerNode {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.1f\t%.3f\t%.3f\t%d\t%d\t%s\t\n", n.Name, n.FillS, n.CPUPerPodMs, n.CPUIdleMsS, n.PeakRSSMiB, n.IdleReqS, n.HeldReqS, n.FillReqs, n.Claims, n.Exit)
	}
	tw.Flush()
}
