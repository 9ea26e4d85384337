package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
)

// Result is one `go test -bench` result line, e.g.
//
//	BenchmarkClaim/conc=16/fsync=on/sandboxd=sim-2  200  177980 ns/op  5621 claims/s
//
// parsed into Base "BenchmarkClaim", Parts [conc=16 fsync=on sandboxd=sim],
// Procs 2, Iters 200 and Metrics {"ns/op": 177980, "claims/s": 5621}.
type Result struct {
	Name    string             // full name without the -procs suffix
	Base    string             // top-level benchmark function
	Parts   []Part             // sub-benchmark levels, in order
	Procs   int                // GOMAXPROCS suffix; 1 when absent
	Iters   int64              // b.N
	Metrics map[string]float64 // unit → value
	Units   []string           // units in line order
	Config  map[string]string  // "key: value" lines above it (pkg, cpu, ...)
	Line    int                // 1-based line number in the input
}

// Part is one sub-benchmark level: "conc=16" is {conc 16}; a level
// without '=' has an empty Key.
type Part struct{ Key, Value string }

// Param returns the value of the sub-benchmark level named key.
func (r Result) Param(key string) (string, bool) {
	for _, p := range r.Parts {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// ParseBench reads `go test -bench` output. Lines that are not results
// (PASS, ok, logs, --- FAIL) are skipped; a line that starts like a result
// (a Benchmark name and an iteration count) but has a malformed value/unit
// list is an error naming the line, so a truncated file is not plotted
// silently.
func ParseBench(r io.Reader) ([]Result, error) {
	var out []Result
	config := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if k, v, ok := configLine(line); ok {
			// Copy on write: earlier results keep the config they ran under.
			config = maps.Clone(config)
			config[k] = v
			continue
		}
		res, ok, err := parseResultLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if !ok {
			continue
		}
		res.Config, res.Line = config, n
		out = append(out, res)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// configLine matches "key: value" where key starts at column 0 with a
// lower-case letter and holds no spaces or upper-case letters (the
// benchmark format's rule), e.g. "pkg: github.com/x/y", "cpu: ...".
func configLine(line string) (key, value string, ok bool) {
	key, value, found := strings.Cut(line, ":")
	if !found || key == "" || key[0] < 'a' || key[0] > 'z' {
		return "", "", false
	}
	if strings.ContainsFunc(key, func(r rune) bool { return r == ' ' || r == '\t' || (r >= 'A' && r <= 'Z') }) {
		return "", "", false
	}
	if value != "" && value[0] != ' ' && value[0] != '\t' {
		return "", "", false
	}
	return key, strings.TrimSpace(value), true
}

// parseResultLine returns ok=false for lines that are not results.
func parseResultLine(line string) (Result, bool, error) {
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "Benchmark") || line[0] != 'B' {
		return Result{}, false, nil
	}
	iters, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return Result{}, false, nil // e.g. "BenchmarkX-2 \t--- FAIL"
	}
	res := Result{Iters: iters, Procs: 1, Metrics: map[string]float64{}}
	res.Name, res.Procs = splitProcs(f[0])
	levels := strings.Split(res.Name, "/")
	res.Base = levels[0]
	for _, l := range levels[1:] {
		k, v, found := strings.Cut(l, "=")
		if !found {
			k, v = "", l
		}
		res.Parts = append(res.Parts, Part{k, v})
	}
	rest := f[2:]
	if len(rest)%2 != 0 {
		return Result{}, false, fmt.Errorf("%s: odd value/unit list %q", res.Name, strings.Join(rest, " "))
	}
	for i := 0; i < len(rest); i += 2 {
		v, err := strconv.ParseFloat(rest[i], 64)
		if err != nil {
			return Result{}, false, fmt.Errorf("%s: value %q for unit %q: %w", res.Name, rest[i], rest[i+1], err)
		}
		unit := rest[i+1]
		if _, dup := res.Metrics[unit]; !dup {
			res.Units = append(res.Units, unit)
		}
		res.Metrics[unit] = v
	}
	return res, true, nil
}

// splitProcs strips the "-N" GOMAXPROCS suffix that go test appends to the
// name when N > 1.
func splitProcs(name string) (string, int) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name, 1
	}
	p, err := strconv.Atoi(name[i+1:])
	if err != nil || p <= 0 {
		return name, 1
	}
	return name[:i], p
}

// paramNumber reads a sub-benchmark value such as "1024", "1k" or "100k"
// as a number.
func paramNumber(s string) (float64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1e9, strings.TrimSuffix(s, "G")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	return v * mult, nil
}
