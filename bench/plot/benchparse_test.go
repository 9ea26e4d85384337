package main

import (
	"os"
	"strings"
	"testing"
)

func parseFile(t *testing.T, path string) []Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := ParseBench(f)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return rs
}

func find(t *testing.T, rs []Result, name string) Result {
	t.Helper()
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no result %q", name)
	return Result{}
}

// The sample is real `go test -bench` output of three runs (store commit,
// full rewrite, pipeline claim) concatenated, as make bench writes it.
func TestParseBenchSample(t *testing.T) {
	rs := parseFile(t, "testdata/bench-sample.txt")
	if len(rs) != 6+3+12 {
		t.Fatalf("parsed %d results, want 21", len(rs))
	}

	c := find(t, rs, "BenchmarkCommit/held=1k/fsync=on")
	if c.Base != "BenchmarkCommit" || c.Procs != 2 || c.Iters != 200 || c.Line != 5 {
		t.Errorf("commit: base %q procs %d iters %d line %d", c.Base, c.Procs, c.Iters, c.Line)
	}
	if len(c.Parts) != 2 || c.Parts[0] != (Part{"held", "1k"}) || c.Parts[1] != (Part{"fsync", "on"}) {
		t.Errorf("commit parts = %v", c.Parts)
	}
	want := map[string]float64{"ns/op": 7802, "commits/s": 128176, "ms/fsync": 0.6124, "puts/fsync": 100, "B/op": 1588, "allocs/op": 9}
	for u, v := range want {
		if c.Metrics[u] != v {
			t.Errorf("commit %s = %v, want %v", u, c.Metrics[u], v)
		}
	}
	if got := strings.Join(c.Units, " "); got != "ns/op commits/s ms/fsync puts/fsync B/op allocs/op" {
		t.Errorf("commit units in line order = %q", got)
	}
	if c.Config["pkg"] != "github.com/cocoonstack/vk-sandbox/pool/store" || c.Config["cpu"] != "Oxide Virtual Turin-like Processor" || c.Config["goos"] != "linux" {
		t.Errorf("commit config = %v", c.Config)
	}

	off := find(t, rs, "BenchmarkCommit/held=1k/fsync=off")
	if _, ok := off.Metrics["ms/fsync"]; ok {
		t.Errorf("fsync=off reports ms/fsync: %v", off.Metrics)
	}

	fr := find(t, rs, "BenchmarkCommitFullRewrite/held=100k")
	if fr.Iters != 3 || fr.Metrics["ns/op"] != 230131610 || fr.Metrics["commits/s"] != 4.345 {
		t.Errorf("full rewrite: iters %d metrics %v", fr.Iters, fr.Metrics)
	}

	cl := find(t, rs, "BenchmarkClaim/conc=1024/fsync=off/sandboxd=inproc")
	if v, _ := cl.Param("sandboxd"); v != "inproc" {
		t.Errorf("claim sandboxd = %q", v)
	}
	if v, ok := cl.Param("missing"); ok {
		t.Errorf("Param(missing) = %q, true", v)
	}
	want = map[string]float64{"ns/op": 9901, "claims/s": 101604, "cpu-µs/claim": 19.61, "p50-µs": 870.6, "p99-µs": 1634, "allocs/op": 60}
	for u, v := range want {
		if cl.Metrics[u] != v {
			t.Errorf("claim %s = %v, want %v", u, cl.Metrics[u], v)
		}
	}
	// Config is the block above each result, not the last one in the file.
	if cl.Config["pkg"] != "github.com/cocoonstack/vk-sandbox/pipeline" || c.Config["pkg"] == cl.Config["pkg"] {
		t.Errorf("config pkg: commit %q, claim %q", c.Config["pkg"], cl.Config["pkg"])
	}
}

func TestParseBenchLines(t *testing.T) {
	in := strings.Join([]string{
		"goos: linux",
		"BenchmarkPlain \t 1000 \t 12.5 ns/op",                  // GOMAXPROCS=1: no suffix
		"BenchmarkSub/fast/size=4-16  10  3 ns/op  2 things/op", // level without '='
		"    bench_test.go:42: a log line",
		"--- FAIL: BenchmarkBroken-2",
		"BenchmarkAlone-2",
		"BenchmarkLogged-2 \t--- BENCH: output follows",
		"PASS",
		"ok  \tgithub.com/x/y\t1.2s",
		"Benchmarking is fun: but not a result",
	}, "\n")
	rs, err := ParseBench(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("parsed %d results, want 2: %+v", len(rs), rs)
	}
	if r := rs[0]; r.Name != "BenchmarkPlain" || r.Procs != 1 || r.Iters != 1000 || r.Metrics["ns/op"] != 12.5 || len(r.Parts) != 0 {
		t.Errorf("plain = %+v", r)
	}
	r := rs[1]
	if r.Name != "BenchmarkSub/fast/size=4" || r.Procs != 16 || r.Metrics["things/op"] != 2 {
		t.Errorf("sub = %+v", r)
	}
	if len(r.Parts) != 2 || r.Parts[0] != (Part{"", "fast"}) || r.Parts[1] != (Part{"size", "4"}) {
		t.Errorf("sub parts = %v", r.Parts)
	}
	if r.Config["goos"] != "linux" {
		t.Errorf("sub config = %v", r.Config)
	}
}

// A line that starts like a result but is cut or garbled is an error that
// names the line and the benchmark, not a silently missing point.
func TestParseBenchMalformed(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"BenchmarkCut-2  200  7802 ns/op  128176", "line 2: BenchmarkCut: odd value/unit list"},
		{"BenchmarkBad-2  200  fast ns/op", `line 2: BenchmarkBad: value "fast" for unit "ns/op"`},
	} {
		_, err := ParseBench(strings.NewReader("pkg: x\n" + tc.line + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to contain %q", tc.line, err, tc.want)
		}
	}
}

func TestParamNumber(t *testing.T) {
	for in, want := range map[string]float64{"1": 1, "1024": 1024, "1k": 1000, "100k": 1e5, "2.5M": 2.5e6, "1G": 1e9} {
		if got, err := paramNumber(in); err != nil || got != want {
			t.Errorf("paramNumber(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "k", "on", "10x"} {
		if got, err := paramNumber(in); err == nil {
			t.Errorf("paramNumber(%q) = %v, want an error", in, got)
		}
	}
}
