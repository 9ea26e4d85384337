package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// benchPlot is one SVG drawn from `go test -bench` output.
type benchPlot struct {
	file  string   // output file name
	bases []string // benchmarks it needs (any one present is enough)
	build func(rs []Result, src string) (chart, error)
}

var benchPlots = []benchPlot{
	{"claims-vs-concurrency.svg", []string{"BenchmarkClaim"}, claimsChart},
	{"commit-cost-vs-size.svg", []string{"BenchmarkCommit", "BenchmarkCommitFullRewrite"}, commitChart},
}

// claimsChart: claims/s against in-flight Pods, one line per remaining
// sub-benchmark combination (fsync on/off × sandboxd sim/inproc). Both axes
// are log: inproc is ~10× sim, and a linear y would flatten the sim lines.
func claimsChart(rs []Result, src string) (chart, error) {
	ss, xs, err := collect(rs, "BenchmarkClaim", "conc", "claims/s", "")
	if err != nil {
		return chart{}, err
	}
	return chart{
		title:    "Claim throughput vs concurrency (" + filepath.Base(src) + ")",
		subtitle: subtitle(rs, "BenchmarkClaim", "op: Create → Running; sim: emulator over loopback HTTP, inproc: zero-latency fake"),
		x:        axis{label: "Pods in flight (conc, log scale)", log: true, ticks: xs},
		y:        axis{label: "claims/s (log scale, higher is better)", log: true, format: si},
		series:   ss,
		markers:  true,
	}, nil
}

// commitChart: wall time per commit (ns/op) against held rows, this store
// (fsync on and off) against the full-rewrite baseline, both axes log.
func commitChart(rs []Result, src string) (chart, error) {
	store, xs1, err := collect(rs, "BenchmarkCommit", "held", "ns/op", "this store")
	if err != nil {
		return chart{}, err
	}
	base, xs2, err := collect(rs, "BenchmarkCommitFullRewrite", "held", "ns/op", "full-rewrite baseline, fsync=on")
	if err != nil {
		return chart{}, err
	}
	xs := append(xs1, xs2...)
	slices.Sort(xs)
	return chart{
		title:    "Commit cost vs table size (" + filepath.Base(src) + ")",
		subtitle: subtitle(rs, "BenchmarkCommit", "ns/op = 1/throughput; this store: 256 concurrent committers, baseline: serialized"),
		x:        axis{label: "claims held (log scale)", log: true, ticks: slices.Compact(xs), format: si},
		y:        axis{label: "time per commit, ns/op (log scale, lower is better)", log: true, format: nanos},
		series:   append(store, base...),
		markers:  true,
	}, nil
}

// collect turns the results of one benchmark into lines: x is the numeric
// value of sub-benchmark xkey, y the metric unit, and every other
// sub-benchmark level (k=v) names the line, after prefix. Repeated runs of
// one point (-count) plot their median with a min–max bar. It returns the
// sorted distinct x values. No results for base is not an error (nil);
// a result missing the param or unit is, naming the result's line.
func collect(rs []Result, base, xkey, unit, prefix string) ([]series, []float64, error) {
	type key struct {
		name string
		x    float64
	}
	vals := map[key][]float64{}
	var names []string
	var xs []float64
	for _, r := range rs {
		if r.Base != base {
			continue
		}
		xv, ok := r.Param(xkey)
		if !ok {
			return nil, nil, fmt.Errorf("line %d: %s has no %s= level", r.Line, r.Name, xkey)
		}
		x, err := paramNumber(xv)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %s: %s=%q is not a number", r.Line, r.Name, xkey, xv)
		}
		y, ok := r.Metrics[unit]
		if !ok {
			return nil, nil, fmt.Errorf("line %d: %s reports no %s (has %v)", r.Line, r.Name, unit, r.Units)
		}
		name := lineName(r, xkey, prefix)
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		if !slices.Contains(xs, x) {
			xs = append(xs, x)
		}
		vals[key{name, x}] = append(vals[key{name, x}], y)
	}
	slices.Sort(xs)
	var out []series
	for _, n := range names {
		s := series{name: n}
		repeated := false
		for _, x := range xs {
			v := vals[key{n, x}]
			if len(v) == 0 {
				continue // this line lacks the point: a gap, not a zero
			}
			slices.Sort(v)
			s.pts = append(s.pts, point{x, median(v)})
			s.lo, s.hi = append(s.lo, v[0]), append(s.hi, v[len(v)-1])
			repeated = repeated || len(v) > 1
		}
		if !repeated {
			s.lo, s.hi = nil, nil
		}
		out = append(out, s)
	}
	return out, xs, nil
}

// lineName joins prefix and the sub-benchmark levels other than xkey:
// "fsync=on, sandboxd=sim".
func lineName(r Result, xkey, prefix string) string {
	var parts []string
	if prefix != "" {
		parts = append(parts, prefix)
	}
	for _, p := range r.Parts {
		switch {
		case p.Key == xkey:
		case p.Key == "":
			parts = append(parts, p.Value)
		default:
			parts = append(parts, p.Key+"="+p.Value)
		}
	}
	return strings.Join(parts, ", ")
}

// median of sorted v.
func median(v []float64) float64 {
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// subtitle states the conditions of the run: note, the runs per point,
// GOMAXPROCS and the CPU of base's results.
func subtitle(rs []Result, base, note string) string {
	runs := map[string]int{}
	parts := []string{note}
	var cpu string
	procs := 0
	for _, r := range rs {
		if r.Base == base {
			runs[r.Name]++
			cpu, procs = r.Config["cpu"], r.Procs
		}
	}
	maxRuns := 0
	for _, n := range runs {
		maxRuns = max(maxRuns, n)
	}
	if maxRuns > 1 {
		parts = append(parts, fmt.Sprintf("median of %d runs, bars min–max", maxRuns))
	}
	if procs > 0 {
		parts = append(parts, fmt.Sprintf("GOMAXPROCS=%d", procs))
	}
	if cpu != "" {
		parts = append(parts, cpu)
	}
	return strings.Join(parts, " · ")
}
