package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// mutation is one block of the list.
type mutation struct {
	ID, Title, File, Why string
	Pkgs                 []string
	Run                  string
	Timeout              time.Duration
	Find, Replace        string
	line                 int               // of its [id] header in the list
	fields               map[string]string // as written, before parsing

	original []byte // the file before the mutation
	applyErr error  // the anchor does not apply, or the setup failed
	baseErr  error  // the tests fail or do not run without the mutation
	baseRan  []string

	killed   bool
	survived bool
	runErr   error
	note     string
	took     time.Duration
	log      string
}

func (m *mutation) result() string {
	switch {
	case m.applyErr != nil || m.baseErr != nil || m.runErr != nil:
		return "ERROR"
	case m.killed:
		return "killed"
	case m.survived:
		return "SURVIVED"
	}
	return "not run"
}

func (m *mutation) usesE2E() bool {
	for _, p := range m.Pkgs {
		if strings.Contains(p, "e2e") || p == "./..." || p == "./kube/..." {
			return true
		}
	}
	return false
}

func needsTools(muts []*mutation) bool {
	for _, m := range muts {
		if m.applyErr == nil && m.usesE2E() {
			return true
		}
	}
	return false
}

// check reads the mutation's file in the copy and verifies that its anchor
// occurs exactly once.
func (m *mutation) check(src string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(src, m.File))
	if err != nil {
		return nil, fmt.Errorf("does not apply: %v", err)
	}
	switch n := bytes.Count(data, []byte(m.Find)); n {
	case 1:
		return data, nil
	case 0:
		return nil, fmt.Errorf("does not apply: its find text is not in %s (the code changed: update scripts/mutants.txt)", m.File)
	default:
		return nil, fmt.Errorf("does not apply: its find text occurs %d times in %s, want exactly once", n, m.File)
	}
}

func (m *mutation) execute(ctx context.Context, src, logs string) {
	path := filepath.Join(src, m.File)
	mutated := bytes.Replace(m.original, []byte(m.Find), []byte(m.Replace), 1)
	st, err := os.Stat(path)
	if err != nil {
		m.runErr = err
		return
	}
	if err := os.WriteFile(path, mutated, st.Mode().Perm()); err != nil {
		m.runErr = err
		return
	}
	defer func() {
		if err := os.WriteFile(path, m.original, st.Mode().Perm()); err != nil {
			// Every later mutation would run on a mutated copy.
			fmt.Fprintf(os.Stderr, "mutants: cannot restore %s: %v\n", path, err)
			os.Exit(2)
		}
	}()
	m.log = filepath.Join(logs, m.ID+".log")
	t0 := time.Now()
	r := goTest(ctx, src, m.log, m.Pkgs, m.Run, m.Timeout)
	m.took = time.Since(t0)
	switch {
	case ctx.Err() != nil:
		m.runErr = errors.New("interrupted")
	case r.buildFailed:
		m.runErr = fmt.Errorf("the mutant does not compile: %s", firstLine(r.buildOutput))
	case len(r.failedTests) > 0 || len(r.failedPkgs) > 0:
		m.killed = true
		var by []string
		for _, t := range r.failedTests {
			by = append(by, shortTest(t))
		}
		for _, p := range r.failedPkgs {
			by = append(by, "package "+shortPkg(p)+" failed"+p2(r.timedOut[p], " (test timeout)"))
		}
		m.note = "failed: " + strings.Join(by, ", ")
	case r.err != nil:
		m.runErr = fmt.Errorf("go test: %v: %s", r.err, firstLine(r.stderr))
	case len(r.passed) == 0:
		m.runErr = fmt.Errorf("no test ran (%d skipped)", len(r.skipped))
	default:
		m.survived = true
		m.note = fmt.Sprintf("%d passed", len(r.passed))
		if len(r.skipped) > 0 {
			var s []string
			for _, t := range r.skipped {
				s = append(s, shortTest(t))
			}
			m.note += fmt.Sprintf(", %d skipped: %s", len(r.skipped), strings.Join(s, ", "))
		}
	}
}

// baseline runs, for each package pattern, the union of the regexes of the
// mutations that test it, without any mutation, and attributes the
// results to each mutation.
func baseline(ctx context.Context, src, logs string, muts []*mutation) {
	type group struct {
		res     []string
		timeout time.Duration
		muts    []*mutation
	}
	groups := map[string]*group{}
	var order []string
	for _, m := range muts {
		if m.applyErr != nil {
			continue
		}
		for _, p := range m.Pkgs {
			g := groups[p]
			if g == nil {
				g = &group{}
				groups[p] = g
				order = append(order, p)
			}
			g.res = append(g.res, m.Run)
			g.timeout = max(g.timeout, m.Timeout)
			g.muts = append(g.muts, m)
		}
	}
	type outcome struct{ pass, fail, skip []string }
	got := map[*mutation]*outcome{}
	for i, p := range order {
		g := groups[p]
		var parts []string
		for _, re := range uniq(g.res) {
			parts = append(parts, "(?:"+re+")")
		}
		log := filepath.Join(logs, fmt.Sprintf("baseline-%d-%s.log", i+1, sanitize(p)))
		logf("baseline %s (%d mutations)", p, len(g.muts))
		t0 := time.Now()
		r := goTest(ctx, src, log, []string{p}, strings.Join(parts, "|"), g.timeout)
		logf("baseline %s: %d passed, %d failed, %d skipped in %s", p, len(r.passed), len(r.failedTests), len(r.skipped), secs(time.Since(t0)))
		for _, m := range g.muts {
			re := regexp.MustCompile(m.Run) // checked by the parser
			o := got[m]
			if o == nil {
				o = &outcome{}
				got[m] = o
			}
			pick := func(dst *[]string, tests []string) {
				for _, t := range tests {
					if name := t[strings.LastIndexByte(t, ' ')+1:]; re.MatchString(name) {
						*dst = append(*dst, t)
					}
				}
			}
			pick(&o.pass, r.passed)
			pick(&o.fail, r.failedTests)
			pick(&o.skip, r.skipped)
			switch {
			case r.buildFailed:
				m.baseErr = fmt.Errorf("the unmutated tree does not compile: %s (see %s)", firstLine(r.buildOutput), log)
			case len(r.failedPkgs) > 0 && m.baseErr == nil:
				m.baseErr = fmt.Errorf("package %s fails without the mutation (see %s)", shortPkg(r.failedPkgs[0]), log)
			case r.err != nil && len(r.failedTests) == 0 && m.baseErr == nil:
				m.baseErr = fmt.Errorf("go test %s: %v: %s", p, r.err, firstLine(r.stderr))
			}
		}
	}
	for _, m := range muts {
		o := got[m]
		if o == nil || m.baseErr != nil {
			continue
		}
		switch {
		case len(o.fail) > 0:
			var names []string
			for _, t := range o.fail {
				names = append(names, shortTest(t))
			}
			m.baseErr = fmt.Errorf("its tests fail without the mutation: %s", strings.Join(names, ", "))
		case len(o.pass)+len(o.skip) == 0:
			m.baseErr = fmt.Errorf("-run %s matches no test in %s (a test was renamed? update scripts/mutants.txt)", m.Run, strings.Join(m.Pkgs, " "))
		}
		m.baseRan = o.pass
	}
}
