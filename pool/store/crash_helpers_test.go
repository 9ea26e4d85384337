package store

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// commitStorm starts stormWorkers goroutines that commit puts and deletes
// on their own keys. Before each op a worker emits "I <op> <key> [value]"
// (the op may be in flight), and after it returned nil "A <op> <key>
// [value]" (acknowledged). A worker whose op fails calls failed and stops.
// The returned function waits for every worker to stop.
func commitStorm(s *Store, run string, emit func(format string, args ...any), failed func(error)) (wait func()) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range stormWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for i := 0; ; i++ {
				key := fmt.Sprintf("ns/w%d-k%d", g, rng.IntN(stormKeys))
				if rng.IntN(10) < 3 {
					emit("I D %s", key)
					if err := s.Delete(ctx, key); err != nil {
						failed(err)
						return
					}
					emit("A D %s", key)
					continue
				}
				v := fmt.Sprintf("r%s-w%d-%d", run, g, i)
				emit("I P %s %s", key, v)
				if err := s.Put(ctx, key, stormClaim(v)); err != nil {
					failed(err)
					return
				}
				emit("A P %s %s", key, v)
			}
		})
	}
	return wg.Wait
}

// stormOutcome is what one storm's output allows for a key: the state
// after its acknowledged ops, or, if an op was in flight when the process
// died, the state after that op too. "" means absent.
type stormOutcome struct {
	acked    string
	inFlight *string
}

// stormTally counts what the checks of a series of storms saw.
type stormTally struct {
	ackedPuts, ackedDels, inFlightLanded, inFlightLost, tornRecoveries int
	unsynced, kept                                                     int // sectors, at power cuts
}

// checkStorm checks s, reopened after a storm that wrote lines ("I <op>
// <key> [value]" before an op, "A <op> <key> [value]" once it returned
// nil), against model, the verified durable state before the storm: every
// acknowledged op is there, an op in flight landed or not, and nothing else
// changed. It returns the new verified state.
func checkStorm(t *testing.T, run int, model map[string]string, lines []string, s *Store, tally *stormTally) map[string]string {
	t.Helper()
	outcomes := map[string]*stormOutcome{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 || (f[0] != "I" && f[0] != "A") {
			if l != "READY" {
				t.Fatalf("run %d: storm said %q", run, l)
			}
			continue
		}
		key, val := f[2], ""
		if f[1] == "P" {
			val = f[3]
		}
		o := outcomes[key]
		if o == nil {
			o = &stormOutcome{acked: model[key]}
			outcomes[key] = o
		}
		if f[0] == "I" {
			o.inFlight = &val
			continue
		}
		o.acked, o.inFlight = val, nil
		if f[1] == "P" {
			tally.ackedPuts++
		} else {
			tally.ackedDels++
		}
	}
	got := map[string]string{}
	s.Range(func(k string, c Claim) bool {
		if !sameClaim(c, stormClaim(c.ID)) {
			t.Errorf("run %d: %s holds a damaged claim %+v", run, k, c)
		}
		got[k] = c.ID
		return true
	})
	for k, v := range model {
		if _, touched := outcomes[k]; !touched && got[k] != v {
			t.Fatalf("run %d: untouched key %s is %q, was %q", run, k, got[k], v)
		}
	}
	for k, o := range outcomes {
		switch g := got[k]; {
		case g == o.acked:
			if o.inFlight != nil && *o.inFlight != o.acked {
				tally.inFlightLost++
			}
		case o.inFlight != nil && g == *o.inFlight:
			tally.inFlightLanded++
		default:
			t.Fatalf("run %d: key %s is %q after the crash; acknowledged state %q (in flight: %v)",
				run, k, g, o.acked, o.inFlight)
		}
	}
	for k := range got {
		if _, known := model[k]; !known && outcomes[k] == nil {
			t.Fatalf("run %d: key %s appeared from nowhere", run, k)
		}
	}
	return got
}

// runStorm runs the child against path, SIGKILLs it delay after it is
// ready, and returns everything it printed.
func runStorm(t *testing.T, path string, run int, delay time.Duration) ([]string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCommitStorm$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperPathEnv+"="+path, helperRunEnv+"="+strconv.Itoa(run))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	done := make(chan []string)
	go func() {
		var lines []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "READY" {
				close(ready)
			}
			lines = append(lines, sc.Text())
		}
		done <- lines
	}()
	select {
	case <-ready:
	case lines := <-done:
		cmd.Wait()
		return nil, fmt.Errorf("child exited before it was ready: %q, stderr:\n%s", lines, stderr.String())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("child not ready after 30s")
	}
	time.Sleep(delay) // the random kill point is what is tested, not a wait for a condition
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	lines := <-done // EOF once the child is dead: all it wrote is read
	cmd.Wait()
	for _, l := range lines {
		if strings.HasPrefix(l, "ERR") || strings.HasPrefix(l, "OPENFAIL") {
			return nil, fmt.Errorf("child failed: %s", l)
		}
	}
	return lines, nil
}
