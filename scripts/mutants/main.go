// Command mutants is `make mutants`: a mutation check of the tests that
// guard vk-sandbox's promises (docs/reliability.md, "Mutation check").
//
// It reads a fixed list of mutations (scripts/mutants.txt), each a plausible
// real bug written as one exact find/replace in one file, copies the
// repository to a temporary directory, and then, one mutation at a time,
// applies it to the copy, runs the tests that should catch it
// (go test -count=1 -run <regex> <packages>) and restores the
// file. A mutation is killed when those tests fail, survived when they
// pass, and an error when it no longer applies (its anchor text is not
// found exactly once), does not compile, or its tests do not run. The
// working tree is never written to.
//
// Before the mutations, a baseline runs the same tests on the unmutated
// copy: a mutation whose tests already fail (or match no test) is an error,
// not a kill.
//
// It prints a table and exits 1 if any mutation survived or was an error,
// 2 if the check could not run at all.
//
//	go run ./scripts/mutants                      # every mutation
//	go run ./scripts/mutants -only 'fsync|crc'    # ids matching a regex
//	go run ./scripts/mutants -rev HEAD            # mutate HEAD, not the working tree
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

func main() { os.Exit(run()) }

type options struct {
	list     string
	only     string
	rev      string
	keep     bool
	baseline bool
	timeout  time.Duration
	work     string
}

func run() int {
	var o options
	flag.StringVar(&o.list, "list", "scripts/mutants.txt", "the mutation list, relative to the repository root")
	flag.StringVar(&o.only, "only", "", "run only the mutations whose id matches this regex")
	flag.StringVar(&o.rev, "rev", "", "copy this git revision instead of the working tree (tracked and untracked, non-ignored files)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary copy of the repository")
	flag.BoolVar(&o.baseline, "baseline", true, "first run every mutation's tests on the unmutated copy")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "go test -timeout for a mutation that sets none")
	flag.StringVar(&o.work, "work", "", "work directory (default: a new one under $TMPDIR); it gets src/ and logs/")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := gitOut(ctx, ".", "rev-parse", "--show-toplevel")
	if err != nil {
		return fatal("not in a git checkout: %v", err)
	}
	root = strings.TrimSpace(root)
	list := o.list
	if !filepath.IsAbs(list) {
		list = filepath.Join(root, list)
	}
	muts, err := parseListFile(list)
	if err != nil {
		return fatal("%v", err)
	}
	if o.only != "" {
		re, err := regexp.Compile(o.only)
		if err != nil {
			return fatal("-only: %v", err)
		}
		var sel []*mutation
		for _, m := range muts {
			if re.MatchString(m.ID) {
				sel = append(sel, m)
			}
		}
		if len(sel) == 0 {
			return fatal("-only %q matches no mutation id", o.only)
		}
		muts = sel
	}
	for _, m := range muts {
		if m.Timeout == 0 {
			m.Timeout = o.timeout
		}
	}

	work := o.work
	if work == "" {
		if work, err = os.MkdirTemp("", "vk-mutants-"); err != nil {
			return fatal("%v", err)
		}
	}
	src, logs := filepath.Join(work, "src"), filepath.Join(work, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return fatal("%v", err)
	}
	if !o.keep {
		defer os.RemoveAll(src)
	}
	start := time.Now()
	what := "the working tree"
	if o.rev != "" {
		what = o.rev
	}
	logf("copying %s of %s to %s", what, root, src)
	if err := copyRepo(ctx, root, src, o.rev); err != nil {
		return fatal("copy: %v", err)
	}

	// Every anchor first: a list out of sync with the code says so at once.
	for _, m := range muts {
		m.original, m.applyErr = m.check(src)
	}

	if needsTools(muts) {
		logf("building the control plane binaries for e2e (scripts/build-tools.sh)")
		t0 := time.Now()
		if err := runLogged(ctx, src, filepath.Join(logs, "build-tools.log"), 0, "bash", "scripts/build-tools.sh"); err != nil {
			logf("build-tools failed (%v): see %s", err, filepath.Join(logs, "build-tools.log"))
			for _, m := range muts {
				if m.applyErr == nil && m.usesE2E() {
					m.applyErr = fmt.Errorf("scripts/build-tools.sh failed: %v", err)
				}
			}
		} else {
			logf("tools ready in %s", secs(time.Since(t0)))
		}
	}

	var baseTook time.Duration
	if o.baseline {
		t0 := time.Now()
		baseline(ctx, src, logs, muts)
		baseTook = time.Since(t0)
	}

	for i, m := range muts {
		if ctx.Err() != nil {
			break
		}
		if m.applyErr != nil || m.baseErr != nil {
			continue
		}
		logf("[%d/%d] %s: %s", i+1, len(muts), m.ID, m.Title)
		m.execute(ctx, src, logs)
		logf("[%d/%d] %s: %s in %s%s", i+1, len(muts), m.ID, m.result(), secs(m.took), noteSuffix(m.note))
	}

	total := time.Since(start)
	report(os.Stdout, muts, total, baseTook, logs, ctx.Err() != nil)
	if o.keep {
		logf("the copy is kept in %s", src)
	}
	if ctx.Err() != nil {
		return 2
	}
	for _, m := range muts {
		if m.result() != "killed" {
			return 1
		}
	}
	return 0
}

func fatal(format string, args ...any) int {
	logf(format, args...)
	return 2
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mutants: "+format+"\n", args...)
}

const modulePath = "github.com/cocoonstack/vk-sandbox/"

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
