package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func seriesNames(ss []series) []string {
	var n []string
	for _, s := range ss {
		n = append(n, s.name)
	}
	return n
}

func TestClaimsChartFromSample(t *testing.T) {
	rs := parseFile(t, "testdata/bench-sample.txt")
	c, err := claimsChart(rs, "testdata/bench-sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"fsync=on, sandboxd=sim", "fsync=off, sandboxd=sim", "fsync=off, sandboxd=inproc"}
	if got := seriesNames(c.series); !slices.Equal(got, wantNames) {
		t.Fatalf("series = %q, want %q", got, wantNames)
	}
	// claims/s per conc 1, 16, 256, 1024, from the sample file.
	wantY := [][]float64{{1588, 5621, 10278, 8380}, {7286, 10673, 15731, 11858}, {41862, 95458, 37877, 101604}}
	for i, s := range c.series {
		var xs, ys []float64
		for _, p := range s.pts {
			xs, ys = append(xs, p.x), append(ys, p.y)
		}
		if !slices.Equal(xs, []float64{1, 16, 256, 1024}) || !slices.Equal(ys, wantY[i]) {
			t.Errorf("%s: x %v y %v, want y %v", s.name, xs, ys, wantY[i])
		}
		if s.lo != nil {
			t.Errorf("%s: single runs drew min–max bars", s.name)
		}
	}
	if !c.x.log || !c.y.log || !slices.Equal(c.x.ticks, []float64{1, 16, 256, 1024}) {
		t.Errorf("axes: x log %v ticks %v, y log %v", c.x.log, c.x.ticks, c.y.log)
	}
	if !strings.Contains(c.title, "bench-sample.txt") {
		t.Errorf("title %q does not name the source", c.title)
	}
}

func TestCommitChartFromSample(t *testing.T) {
	rs := parseFile(t, "testdata/bench-sample.txt")
	c, err := commitChart(rs, "testdata/bench-sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float64{ // ns/op at held 1k, 10k, 100k
		"this store, fsync=on":            {7802, 14230, 17646},
		"this store, fsync=off":           {2544, 14933, 4266},
		"full-rewrite baseline, fsync=on": {3280771, 31233485, 230131610},
	}
	if len(c.series) != len(want) {
		t.Fatalf("series = %q", seriesNames(c.series))
	}
	for _, s := range c.series {
		var ys []float64
		for _, p := range s.pts {
			ys = append(ys, p.y)
		}
		if !slices.Equal(ys, want[s.name]) {
			t.Errorf("%q: ns/op %v, want %v", s.name, ys, want[s.name])
		}
	}
	if !c.x.log || !c.y.log || !slices.Equal(c.x.ticks, []float64{1000, 10000, 100000}) {
		t.Errorf("axes: x log %v ticks %v, y log %v", c.x.log, c.x.ticks, c.y.log)
	}
}

// -count=3 gives three lines per point: the median is plotted, with the
// min and max as a bar; a point missing from one line is a gap.
func TestCollectRepeatedRuns(t *testing.T) {
	in := `BenchmarkClaim/conc=1/fsync=on-2  10  1 ns/op  300 claims/s
BenchmarkClaim/conc=1/fsync=on-2  10  1 ns/op  100 claims/s
BenchmarkClaim/conc=1/fsync=on-2  10  1 ns/op  200 claims/s
BenchmarkClaim/conc=16/fsync=on-2  10  1 ns/op  500 claims/s
BenchmarkClaim/conc=16/fsync=on-2  10  1 ns/op  700 claims/s
BenchmarkClaim/conc=16/fsync=off-2  10  1 ns/op  900 claims/s
BenchmarkOther-2  10  1 ns/op
`
	rs, err := ParseBench(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	ss, xs, err := collect(rs, "BenchmarkClaim", "conc", "claims/s", "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(xs, []float64{1, 16}) || len(ss) != 2 {
		t.Fatalf("xs %v series %q", xs, seriesNames(ss))
	}
	on := ss[0]
	if on.name != "fsync=on" || !slices.Equal(on.pts, []point{{1, 200}, {16, 600}}) ||
		!slices.Equal(on.lo, []float64{100, 500}) || !slices.Equal(on.hi, []float64{300, 700}) {
		t.Errorf("fsync=on = %+v", on)
	}
	off := ss[1]
	if off.name != "fsync=off" || !slices.Equal(off.pts, []point{{16, 900}}) || off.lo != nil {
		t.Errorf("fsync=off = %+v", off)
	}
	if sub := subtitle(rs, "BenchmarkClaim", "n"); !strings.Contains(sub, "median of 3 runs") {
		t.Errorf("subtitle %q does not say the points are medians", sub)
	}
}

func TestCollectErrorsNameTheResult(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"BenchmarkClaim/conc=1/fsync=on-2 10 5 ns/op", "line 1: BenchmarkClaim/conc=1/fsync=on reports no claims/s (has [ns/op])"},
		{"BenchmarkClaim/fsync=on-2 10 5 ns/op 1 claims/s", "line 1: BenchmarkClaim/fsync=on has no conc= level"},
		{"BenchmarkClaim/conc=many-2 10 5 ns/op 1 claims/s", `line 1: BenchmarkClaim/conc=many: conc="many" is not a number`},
	} {
		rs, err := ParseBench(strings.NewReader(tc.line))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := collect(rs, "BenchmarkClaim", "conc", "claims/s", ""); err == nil || err.Error() != tc.want {
			t.Errorf("%q: err = %v, want %q", tc.line, err, tc.want)
		}
	}
}

// wellFormed fails unless data is well-formed XML with an <svg> root.
func wellFormed(t *testing.T, name string, data []byte) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(string(data)))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", name, err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q, want svg", name, root)
	}
}

func TestPlotBenchWritesBothSVGs(t *testing.T) {
	dir := t.TempDir()
	files, err := plotBench("testdata/bench-sample.txt", dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "claims-vs-concurrency.svg"), filepath.Join(dir, "commit-cost-vs-size.svg")}
	if !slices.Equal(files, want) {
		t.Fatalf("wrote %q, want %q", files, want)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		wellFormed(t, f, data)
		s := string(data)
		for _, sub := range []string{"(bench-sample.txt)", "log scale", "<circle", "fsync=on"} {
			if !strings.Contains(s, sub) {
				t.Errorf("%s lacks %q", f, sub)
			}
		}
	}
	commit, _ := os.ReadFile(want[1])
	for _, tick := range []string{">1k<", ">10k<", ">100k<", ">1µs<", ">100ms<", "full-rewrite baseline"} {
		if !strings.Contains(string(commit), tick) {
			t.Errorf("commit plot lacks %q", tick)
		}
	}
}

// A file with only the store benchmarks yields the commit plot alone; one
// with neither is an error naming the file.
func TestPlotBenchPartialInput(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "store-only.txt")
	data, _ := os.ReadFile("testdata/bench-sample.txt")
	var keep []string
	for l := range strings.SplitSeq(string(data), "\n") {
		if !strings.HasPrefix(l, "BenchmarkClaim") {
			keep = append(keep, l)
		}
	}
	if err := os.WriteFile(src, []byte(strings.Join(keep, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := plotBench(src, dir)
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != "commit-cost-vs-size.svg" {
		t.Fatalf("store-only: files %q, err %v", files, err)
	}

	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte("PASS\nok x 0.1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := plotBench(empty, dir); err == nil || !strings.Contains(err.Error(), empty) {
		t.Fatalf("empty input: err = %v, want one naming %s", err, empty)
	}
}
