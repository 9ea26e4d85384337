//go:build linux

package pool_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/telemetry"
)

// BenchmarkClientClaim is the client's cost of one claim exchange over
// loopback HTTP, one call at a time, against the emulator in a process of
// its own (a fresh one for each case) (cmd/sandboxd-sim, zero claim latency, a warm pool that refills
// at once and no cold-boot delay), so that cpu-µs/op is the client's CPU
// only:
//
//   - client=raw is the floor: a plain http.Client with the daemon's
//     transport settings, encoding/json both ways into a small struct.
//   - client=pool is pool.Client as the daemon builds it: telemetry.Setup
//     with no exporter (spans carry ids, are not recorded), the metrics
//     Observer, the default transport.
//   - client=pool-sampled is the same with every span recorded and handed
//     to a batch processor (tracing on; export itself is off the hot path).
//
// cpu-µs/op is process CPU per claim (getrusage), which a loaded, shared
// host distorts less than ns/op; p50-µs and p99-µs are per-claim latency.
func BenchmarkClientClaim(b *testing.B) {
	b.Run("client=raw", func(b *testing.B) { benchClaims(b, rawClaimer) })
	b.Run("client=pool", func(b *testing.B) {
		benchClaims(b, func(b *testing.B, url string) func(context.Context) error { return poolClaimer(b, url, false) })
	})
	b.Run("client=pool-sampled", func(b *testing.B) {
		benchClaims(b, func(b *testing.B, url string) func(context.Context) error { return poolClaimer(b, url, true) })
	})
}

// benchIdleConns is the transport's idle pool on both sides, as the daemon
// sizes it for its default workers.
const benchIdleConns = 256

var benchClaimReq = pool.ClaimRequest{Template: "default", TTLSeconds: 3600, ClaimRef: "bench/p-000000"}

// benchClaims measures the claims of the client that build makes, against
// an emulator of its own: each case meets the same fresh server, whose
// index grows by b.N rows (a larger index would answer more slowly, and a
// client waiting longer spends more CPU parking and waking).
func benchClaims(b *testing.B, build func(b *testing.B, url string) func(context.Context) error) {
	claim := build(b, startSimProcess(b))
	ctx := context.Background()
	for range 8 { // the connection dialled, the first-call paths taken
		if err := claim(ctx); err != nil {
			b.Fatal(err)
		}
	}
	lats := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := testkit.ProcessCPU()
	for i := range lats {
		start := time.Now()
		if err := claim(ctx); err != nil {
			b.Fatal(err)
		}
		lats[i] = time.Since(start)
	}
	cpu := testkit.ProcessCPU() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	testkit.ReportLatencies(b, lats)
}

// rawClaimer is the floor: what any client of POST /v1/claim must do.
func rawClaimer(b *testing.B, url string) func(context.Context) error {
	// The settings of the client's default transport (pool/client.go).
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          benchIdleConns,
		MaxIdleConnsPerHost:   benchIdleConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	type claimed struct {
		ID        string    `json:"id"`
		Token     string    `json:"token"`
		Deadline  time.Time `json:"deadline"`
		OwnerAddr string    `json:"owner_addr"`
	}
	return func(ctx context.Context) error {
		body, err := json.Marshal(benchClaimReq)
		if err != nil {
			return err
		}
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/claim", bytes.NewReader(body))
		if err != nil {
			return err
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+nodeToken)
		resp, err := hc.Do(r)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		var c claimed
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
			return err
		}
		if c.ID == "" || c.Token == "" {
			return fmt.Errorf("claim answer %+v lacks id or token", c)
		}
		_, err = io.Copy(io.Discard, resp.Body) // the newline: the connection is reused
		return err
	}
}

// poolClaimer is pool.Client built as cmd/vk-sandbox builds it. sampled
// records every span (tracing on) instead of the default no-exporter
// setup, where spans carry ids but are not recorded.
func poolClaimer(b *testing.B, url string, sampled bool) func(context.Context) error {
	b.Setenv("OTEL_TRACES_EXPORTER", "none")
	b.Setenv("OTEL_METRICS_EXEMPLAR_FILTER", "")
	prev := otel.GetTracerProvider()
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tel.Shutdown(context.Background())
	})
	if sampled {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{}))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		otel.SetTracerProvider(tp)
	}
	c, err := pool.NewClient(pool.ClientOptions{
		BaseURL: url, Token: nodeToken, Observer: tel.Metrics.SandboxdObserver(),
		MaxIdleConns: benchIdleConns,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.CloseIdleConnections)
	return func(ctx context.Context) error {
		_, err := c.Claim(ctx, benchClaimReq)
		return err
	}
}

// discardSpans is an exporter that drops every span.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// simBin is cmd/sandboxd-sim, built once per test binary and removed
// after the run (afterRun).
var simBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// startSimProcess runs the emulator in a process of its own on a free
// loopback port and returns its URL; the benchmark's cleanup stops it, and
// it dies with this process's thread if the benchmark is killed.
func startSimProcess(b *testing.B) string {
	b.Helper()
	simBin.once.Do(func() {
		if simBin.dir, simBin.err = os.MkdirTemp("", "pool-bench-"); simBin.err != nil {
			return
		}
		afterRun = append(afterRun, func() { _ = os.RemoveAll(simBin.dir) })
		simBin.path = filepath.Join(simBin.dir, "sandboxd-sim")
		cmd := exec.Command("go", "build", "-o", simBin.path, "github.com/cocoonstack/vk-sandbox/cmd/sandboxd-sim")
		// From this file's directory, so that a test binary built with
		// go test -c may run from anywhere.
		_, self, _, _ := runtime.Caller(0)
		cmd.Dir, cmd.Stdout, cmd.Stderr = filepath.Dir(self), os.Stderr, os.Stderr
		simBin.err = cmd.Run()
	})
	if simBin.err != nil {
		b.Fatalf("build sandboxd-sim: %v", simBin.err)
	}
	dir := b.TempDir()
	rootFile, nodeFile := filepath.Join(dir, "root"), filepath.Join(dir, "node")
	for f, tok := range map[string]string{rootFile: rootToken, nodeFile: nodeToken} {
		if err := os.WriteFile(f, []byte(tok), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.Command(simBin.path, "--listen", "127.0.0.1:0", "--token-file", rootFile,
		"--tenant-token-file", "node="+nodeFile, "--pools", "default=64", "--refill-delay", "0",
		"--cold-latency", "-1ns", "--claim-latency", "0", "--log-level", "error")
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	// Its one stdout line names the port; EOF (it exited) ends the scan.
	line, err := bufio.NewReader(out).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		b.Fatalf("sandboxd-sim: no listening line (got %q, %v)", line, err)
	}
	return url
}
