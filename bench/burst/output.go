package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

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
	if err := podload.WriteJSON(out, rep); err != nil {
		return err
	}
	return podload.WriteCSV(csvPath(out), csvHeader, rows)
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
		if isProvider(r.Mode) {
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
	fmt.Fprintln(tw, "N\tmode\tcreate call\tack->watch seen\tack->claimed\tclaimed->Running\tmax queue\tevents\trewatches\t")
	for _, r := range runs {
		q := "-"
		if r.Metrics != "" {
			q = strconv.FormatFloat(r.MaxQueue, 'f', 0, 64)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.3f / %.3f\t%.3f / %.3f\t%.3f / %.3f\t%.3f / %.3f\t%s\t%d\t%d\t\n", r.N, r.Mode,
			r.LatCreateCall.P50, r.LatCreateCall.P99, r.LatAckToSeen.P50, r.LatAckToSeen.P99,
			r.LatAckToClaim.P50, r.LatAckToClaim.P99, r.LatClaimToRunning.P50, r.LatClaimToRunning.P99, q, r.Events, r.Rewatches)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nCPU seconds during the burst (first create to last Running seen), by process; busy = machine / (watch_s x cores):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tmode\tharness\tkube-apiserver\tetcd\tnode\tnode ms per Pod\tother\tmachine\tbusy\t")
	for _, r := range runs {
		c := r.CPU
		busy := "-"
		if r.WallS > 0 {
			busy = fmt.Sprintf("%.0f%%", 100*c["machine"]/(r.WatchS*float64(runtime.NumCPU())))
		}
		fmt.Fprintf(tw, "%d\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%.2f\t%.2f\t%s\t\n", r.N, r.Mode,
			c["harness"], c["kube-apiserver"], c["etcd"], nodeCPU(r), 1000*nodeCPU(r)/float64(r.N), c["other"], c["machine"], busy)
	}
	tw.Flush()
	fmt.Fprintln(w, "node: vk-sandbox, or bench/nullnode in null-node mode (the API work of a node alone)")

	fmt.Fprintln(w, "\napiserver requests during the burst (apiserver_request_total delta, top 8):")
	for _, r := range runs {
		fmt.Fprintf(w, "  %d %s: %s\n", r.N, r.Mode, topRequests(r.APIRequests, 8))
	}

	fmt.Fprintln(w, "\nratios of wall_s (in brackets: of watch_s, the same measurement in every mode); null-node is the minimal node, the floor of any node:")
	for _, x := range runRatios(runs) {
		fmt.Fprintf(w, "N=%d  provider/null-node = %s   provider/bare = %s   null-node/bare = %s   default-limiters/provider = %s\n", x.N,
			x.ProviderNull, x.ProviderBare, x.NullBare, x.DefaultProvider)
		if x.CPUProviderNull != "-" {
			fmt.Fprintf(w, "N=%d  node CPU per Pod: provider / null-node = %s\n", x.N, x.CPUProviderNull)
		}
		if x.ProviderNullClaim != "-" {
			fmt.Fprintf(w, "N=%d  provider/null-node-claim = %s   null-node-claim/null-node = %s   node CPU per Pod: provider / null-node-claim = %s\n", x.N,
				x.ProviderNullClaim, x.NullClaimNull, x.CPUProviderNullClaim)
		}
	}
}

// ratios are one burst size's comparisons between modes of the same run,
// as printed ("-": a mode was not run). Wall ratios read "wall [watch]",
// with " (partial)" when either run did not finish.
type ratios struct {
	N               int    `json:"n"`
	ProviderNull    string `json:"provider_over_null_node"`
	ProviderBare    string `json:"provider_over_bare"`
	NullBare        string `json:"null_node_over_bare"`
	DefaultProvider string `json:"default_limiters_over_provider"`
	// CPUProviderNull is vk-sandbox's CPU over the null node's, with each
	// one's ms per Pod: "1.50 (0.750 / 0.500 ms)".
	CPUProviderNull string `json:"cpu_provider_over_null_node"`
	// The same against null-node-claim, the minimal node that also claims.
	ProviderNullClaim    string `json:"provider_over_null_node_claim"`
	NullClaimNull        string `json:"null_node_claim_over_null_node"`
	CPUProviderNullClaim string `json:"cpu_provider_over_null_node_claim"`
}

func runRatios(runs []runResult) []ratios {
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
	cpuRatio := func(n int, a, b string) string {
		x, okx := byKey[fmt.Sprint(n, a)]
		y, oky := byKey[fmt.Sprint(n, b)]
		if !okx || !oky || nodeCPU(y) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f (%.3f / %.3f ms)", nodeCPU(x)/nodeCPU(y), 1000*nodeCPU(x)/float64(n), 1000*nodeCPU(y)/float64(n))
	}
	out := make([]ratios, 0, len(sizes))
	for _, n := range sizes {
		out = append(out, ratios{N: n, ProviderNull: ratio(n, modeProvider, modeNull), ProviderBare: ratio(n, modeProvider, modeBare),
			NullBare: ratio(n, modeNull, modeBare), DefaultProvider: ratio(n, modeDefault, modeProvider),
			CPUProviderNull:   cpuRatio(n, modeProvider, modeNull),
			ProviderNullClaim: ratio(n, modeProvider, modeNullClaim), NullClaimNull: ratio(n, modeNullClaim, modeNull),
			CPUProviderNullClaim: cpuRatio(n, modeProvider, modeNullClaim)})
	}
	return out
}

// nodeCPU is the CPU seconds of the run's node process.
func nodeCPU(r runResult) float64 { return podload.NodeCPU(r.CPU) }

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
