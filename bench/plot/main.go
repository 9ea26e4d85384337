// Command plot renders SVG line charts (standard library only).
//
// Three shapes of input:
//
//	plot -in points.csv -out chart.svg [-x x -y y -series series]
//	    one line per distinct value of the series column, points sorted by x
//	plot -cdf -value client_latency_s -series mode,n -in burst.csv -out cdf.svg
//	    the empirical CDF of the value column, one line per series
//	plot -bench bench/results/bench-latest.txt [-out bench/results]
//	    `go test -bench` output (make bench) into claims-vs-concurrency.svg
//	    (BenchmarkClaim) and commit-cost-vs-size.svg (BenchmarkCommit and
//	    BenchmarkCommitFullRewrite) in the -out directory
//
// -series takes several columns joined into one label; empty values are
// skipped. -logx draws x on a log10 scale; -title, -xlabel and -ylabel
// label the CSV charts. `make plots` runs -bench on bench-latest.txt and
// -cdf on the newest burst CSV.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	in := flag.String("in", "", "input CSV (header row required)")
	bench := flag.String("bench", "", "input `go test -bench` output; -out is then a directory (default: the input's)")
	out := flag.String("out", "", "output SVG (default: input with .svg); with -bench, the output directory")
	var o csvOpts
	flag.StringVar(&o.x, "x", "x", "x column (xy mode)")
	flag.StringVar(&o.y, "y", "y", "y column (xy mode)")
	flag.StringVar(&o.series, "series", "series", "series column(s), comma separated; empty: one series")
	flag.BoolVar(&o.cdf, "cdf", false, "plot the empirical CDF of -value per series")
	flag.StringVar(&o.value, "value", "value", "value column (cdf mode)")
	flag.StringVar(&o.title, "title", "", "chart title")
	flag.StringVar(&o.xlabel, "xlabel", "", "x axis label (default: the column name)")
	flag.StringVar(&o.ylabel, "ylabel", "", "y axis label (default: the column name, or 'fraction of Pods' with -cdf)")
	flag.BoolVar(&o.logx, "logx", false, "log10 x axis")
	flag.Parse()
	switch {
	case *in != "" && *bench != "":
		fail("-in and -bench are exclusive")
	case *bench != "":
		files, err := plotBench(*bench, cmp.Or(*out, filepath.Dir(*bench)))
		if err != nil {
			fail(err.Error())
		}
		for _, f := range files {
			fmt.Println(f)
		}
	case *in != "":
		if *out == "" {
			*out = strings.TrimSuffix(*in, ".csv") + ".svg"
		}
		if err := plotCSV(*in, *out, o); err != nil {
			fail(err.Error())
		}
		fmt.Println(*out)
	default:
		fail("-in or -bench is required")
	}
}

func plotCSV(in, out string, o csvOpts) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := csvChart(f, o)
	if err != nil {
		return fmt.Errorf("read %s: %w", in, err)
	}
	return os.WriteFile(out, []byte(render(c)), 0o644)
}

// plotBench writes every benchPlot whose benchmarks are in the input and
// returns the files written. A plot whose benchmarks are absent is skipped
// with a warning; none at all is an error.
func plotBench(in, outDir string) ([]string, error) {
	f, err := os.Open(in)
	if err != nil {
		return nil, err
	}
	rs, err := ParseBench(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in, err)
	}
	var written []string
	for _, p := range benchPlots {
		if !slices.ContainsFunc(rs, func(r Result) bool { return slices.Contains(p.bases, r.Base) }) {
			fmt.Fprintf(os.Stderr, "plot: %s has no %s results: %s skipped\n", in, strings.Join(p.bases, " or "), p.file)
			continue
		}
		c, err := p.build(rs, in)
		if err != nil {
			return written, fmt.Errorf("%s: %s: %w", in, p.file, err)
		}
		path := filepath.Join(outDir, p.file)
		if err := os.WriteFile(path, []byte(render(c)), 0o644); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	if len(written) == 0 {
		return nil, fmt.Errorf("%s: no benchmark results to plot (%d result lines)", in, len(rs))
	}
	return written, nil
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "plot:", msg)
	os.Exit(2)
}
