//go:build unix

package pool_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// BenchmarkClientClaim is the cost of one claim exchange over loopback
// HTTP, client and server in this process, with conc calls in flight. It
// crosses the real client and emulator with a bare net/http client (no
// otelhttp, no decoding) and a bare handler (a canned answer of the same
// size), so the bare/bare line is the net/http floor and the other lines
// show what the client and the emulator add to it. cpu-µs/op is process CPU
// per exchange, which a loaded shared host distorts less than ns/op.
func BenchmarkClientClaim(b *testing.B) {
	for _, conc := range []int{1, 256} {
		for _, server := range []string{"sim", "bare"} {
			for _, client := range []string{"pool", "bare"} {
				b.Run(fmt.Sprintf("conc=%d/server=%s/client=%s", conc, server, client), func(b *testing.B) {
					benchClientClaim(b, conc, server == "sim", client == "pool")
				})
			}
		}
	}
}

const cannedClaim = `{"id":"sb_6f1c2a9b0d3e4f51","token":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","deadline":"2026-01-02T03:04:05.678Z","owner_addr":"10.77.0.1:7777"}` + "\n"

func benchClientClaim(b *testing.B, conc int, simServer, poolClient bool) {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, cannedClaim)
	})
	if simServer {
		s, err := sim.New(sim.Config{RootToken: rootToken, NodeToken: nodeToken, Pools: map[pool.Key]int{defaultKey: 8}, ColdLatency: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		h = s.Handler()
	}
	ts := httptest.NewServer(h)
	b.Cleanup(ts.Close)

	req := pool.ClaimRequest{Template: "default", TTLSeconds: 3600, ClaimRef: "bench/p-000000"}
	var claim func(context.Context) error
	if poolClient {
		c, err := pool.NewClient(pool.ClientOptions{BaseURL: ts.URL, Token: nodeToken})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.CloseIdleConnections)
		claim = func(ctx context.Context) error { _, err := c.Claim(ctx, req); return err }
	} else {
		tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}
		b.Cleanup(tr.CloseIdleConnections)
		body := []byte(`{"template":"default","ttl_seconds":3600,"claim_ref":"bench/p-000000"}`)
		claim = func(ctx context.Context) error {
			r, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/claim", bytes.NewReader(body))
			if err != nil {
				return err
			}
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", "Bearer "+nodeToken)
			resp, err := tr.RoundTrip(r)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, err = io.Copy(io.Discard, resp.Body)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			return err
		}
	}
	run := func(n int) {
		var next atomic.Int64
		var failed atomic.Pointer[error]
		var wg sync.WaitGroup
		for range min(conc, n) {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					if err := claim(context.Background()); err != nil {
						failed.CompareAndSwap(nil, &err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err := failed.Load(); err != nil {
			b.Fatal(*err)
		}
	}
	run(conc) // connections dialled
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	run(b.N)
	cpu := processCPU() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
}

// processCPU is user+system CPU time used by this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
