package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

// testRun is what one go test -json invocation reported. Tests are
// "<import path> <TestName>", top level only.
type testRun struct {
	passed, failedTests, skipped []string
	failedPkgs                   []string // failed with no failed test: TestMain, a leak check, a timeout
	timedOut                     map[string]bool
	buildFailed                  bool
	buildOutput                  string
	stderr                       string
	err                          error
}

type testEvent struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string
	FailedBuild string
}

// goTest runs go test -json and sorts its events. No -failfast: with it the
// go command starts no further package after a failure, and the table is
// to name every test that caught the mutant.
func goTest(ctx context.Context, dir, logPath string, pkgs []string, runRe string, timeout time.Duration) testRun {
	args := []string{"test", "-json", "-count=1", "-timeout", timeout.String(), "-run", runRe}
	args = append(args, pkgs...)
	r := testRun{timedOut: map[string]bool{}}
	lf, err := os.Create(logPath)
	if err != nil {
		r.err = err
		return r
	}
	defer lf.Close()
	fmt.Fprintf(lf, "$ cd %s && go %s\n\n", dir, shellJoin(args))

	// A backstop above go test's own -timeout (which panics the test binary
	// and names the hung test): a wedged go command or a child it left.
	cctx, cancel := context.WithTimeout(ctx, timeout+3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = testEnv()
	setProcessGroup(cmd)
	var stderr bytes.Buffer
	cmd.Stderr = io.MultiWriter(&stderr, lf)
	out, err := cmd.StdoutPipe()
	if err != nil {
		r.err = err
		return r
	}
	if err := cmd.Start(); err != nil {
		r.err = err
		return r
	}
	failedPkg := map[string]bool{}
	hasFailedTest := map[string]bool{}
	var build strings.Builder
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		var ev testEvent
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			fmt.Fprintf(lf, "%s\n", line)
			continue
		}
		switch ev.Action {
		case "output":
			io.WriteString(lf, ev.Output)
			if strings.Contains(ev.Output, "panic: test timed out after") {
				r.timedOut[ev.Package] = true
			}
			continue
		case "build-output":
			io.WriteString(lf, ev.Output)
			build.WriteString(ev.Output)
			continue
		case "build-fail":
			r.buildFailed = true
			continue
		}
		if ev.FailedBuild != "" {
			r.buildFailed = true
		}
		if ev.Test == "" {
			if ev.Action == "fail" {
				failedPkg[ev.Package] = true
			}
			continue
		}
		if strings.Contains(ev.Test, "/") {
			continue // subtests are reported through their parent
		}
		name := ev.Package + " " + ev.Test
		switch ev.Action {
		case "pass":
			r.passed = append(r.passed, name)
		case "fail":
			r.failedTests = append(r.failedTests, name)
			hasFailedTest[ev.Package] = true
		case "skip":
			r.skipped = append(r.skipped, name)
		}
	}
	r.err = cmd.Wait()
	if cctx.Err() != nil && ctx.Err() == nil {
		r.err = fmt.Errorf("killed after %s: go test outlived its own -timeout", timeout+3*time.Minute)
	}
	for p := range failedPkg {
		if !hasFailedTest[p] {
			r.failedPkgs = append(r.failedPkgs, p)
		}
	}
	sort.Strings(r.failedPkgs)
	r.stderr = stderr.String()
	r.buildOutput = build.String()
	if r.buildFailed && r.buildOutput == "" {
		r.buildOutput = r.stderr
	}
	if !r.buildFailed && r.err != nil && strings.Contains(r.stderr, "[setup failed]") {
		r.buildFailed = true
		r.buildOutput = r.stderr
	}
	return r
}

// testEnv runs the suites at CI size, whatever the caller's environment.
func testEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VK_RELIABILITY=") {
			env = append(env, kv)
		}
	}
	return env
}

func runLogged(ctx context.Context, dir, logPath string, timeout time.Duration, name string, args ...string) error {
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	setProcessGroup(cmd)
	return cmd.Run()
}
