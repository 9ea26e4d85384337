package pipeline_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func onOff(v bool) string {
	if v {
		return "on"
	}
	return "off"
}

func benchClaim(b *testing.B, conc int, fsync, inproc bool) {
	var sbx pipeline.Sandboxd
	if inproc {
		sbx = &inprocSandboxd{}
	} else {
		sbx = newSim(b, sim.Config{}).root
	}
	st := openStore(b, tempStorePath(b), fsync)
	rep := &benchReporter{}
	e := startEngine(b, pipeline.Config{NodeKey: testKey, Sandboxd: sbx, Store: st, Reporter: rep, Logger: quiet})
	run := func(prefix string, n int, lats []time.Duration) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(conc, n) {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					lat := rep.claim(b, e, prefix, i)
					if lats != nil {
						lats[i] = lat
					}
				}
			})
		}
		wg.Wait()
	}
	run("warm", conc, nil) // connections, maps and the log file warmed up

	lats := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, start := testkit.ProcessCPU(), time.Now()
	run("p", b.N, lats)
	elapsed, cpu := time.Since(start), testkit.ProcessCPU()-cpu0
	b.StopTimer()
	if err := rep.failure(); err != "" {
		b.Fatal(err)
	}
	reportLatency(b, elapsed, lats)
	// Process CPU per claim, emulator included: the load-independent cost.
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/claim")
}

func reportLatency(b *testing.B, elapsed time.Duration, lats []time.Duration) {
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "claims/s")
	testkit.ReportLatencies(b, lats)
}

// benchReporter wakes the one goroutine waiting for a UID's Running.
type benchReporter struct {
	waiters sync.Map // uid → chan struct{}
	mu      sync.Mutex
	err     string
}

func (r *benchReporter) expect(uid string) chan struct{} {
	ch := make(chan struct{})
	r.waiters.Store(uid, ch)
	return ch
}

// claim runs one transaction for a fresh Pod and returns Create→Running.
func (r *benchReporter) claim(b *testing.B, e *pipeline.Engine, prefix string, i int) time.Duration {
	n := strconv.Itoa(i)
	uid := prefix + "-uid-" + n
	ch := r.expect(uid)
	t0 := time.Now()
	if err := e.Create(context.Background(), intent("bench/"+prefix+"-"+n, uid, "")); err != nil {
		r.fail(err.Error())
		return 0
	}
	<-ch
	return time.Since(t0)
}

func (r *benchReporter) fail(msg string) {
	r.mu.Lock()
	if r.err == "" {
		r.err = msg
	}
	r.mu.Unlock()
}

func (r *benchReporter) failure() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *benchReporter) Running(_ context.Context, ref pipeline.PodRef, _ pipeline.ClaimView, _ bool) {
	if ch, ok := r.waiters.LoadAndDelete(ref.UID); ok {
		close(ch.(chan struct{}))
	}
}

// Pending would leave a benchmark goroutine waiting: record it, and release
// the waiter so the run ends and reports the failure.
func (r *benchReporter) Pending(_ context.Context, ref pipeline.PodRef, reason, msg string) {
	r.fail(string(ref.Key) + ": Pending " + reason + ": " + msg)
	if ch, ok := r.waiters.LoadAndDelete(ref.UID); ok {
		close(ch.(chan struct{}))
	}
}

func (r *benchReporter) Expired(context.Context, pipeline.PodRef, pipeline.ClaimView) {}

func (r *benchReporter) Renewed(context.Context, pipeline.PodRef, pipeline.ClaimView) {}

func (r *benchReporter) Warning(context.Context, pipeline.PodRef, string, string) {}

// inprocSandboxd answers every claim at once, without HTTP.
type inprocSandboxd struct{ n atomic.Uint64 }

func (s *inprocSandboxd) Claim(_ context.Context, r pool.ClaimRequest) (pool.ClaimResponse, error) {
	id := strconv.FormatUint(s.n.Add(1), 16)
	return pool.ClaimResponse{
		ID: "sb_" + id, Token: "tok-inproc-" + id, OwnerAddr: "10.77.0.1:7777",
		Deadline: time.Now().Add(time.Duration(r.TTLSeconds) * time.Second),
	}, nil
}

func (s *inprocSandboxd) Release(context.Context, string, string) error { return nil }

func (s *inprocSandboxd) List(context.Context, pool.ListOptions) ([]pool.Sandbox, error) {
	return []pool.Sandbox{}, nil
}

func (s *inprocSandboxd) Renew(context.Context, string, string, int64) (pool.RenewResponse, error) {
	return pool.RenewResponse{}, pool.ErrNotFound
}

func (s *inprocSandboxd) Tenant() bool { return false }

// Features: a current sandboxd.
func (s *inprocSandboxd) Features() (pool.Features, bool) {
	return pool.Features{Token: pool.TokenRoot, Metadata: true, ClaimRefFilter: true, TokenRead: true}, true
}

func (s *inprocSandboxd) Get(_ context.Context, id string) (pool.Sandbox, error) {
	return pool.Sandbox{}, fmt.Errorf("sandbox %s: %w", id, pool.ErrNotFound)
}
