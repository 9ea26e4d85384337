package pipeline_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// BenchmarkClaim measures one claim transaction per op: Create for a fresh
// Pod (unique key and UID) until the Reporter sees Running, with conc Pods in
// flight at once, through the engine at its default shape (8 shards × 32
// workers). sandboxd=sim is the real client against the real emulator over
// loopback HTTP with no claim latency (the HTTP exchange is the cost);
// sandboxd=inproc is a zero-latency in-process fake with fsync off, which
// leaves only the pipeline's own work.
//
// Metrics: claims/s, p50/p99 Create→Running latency in µs, allocs/op, and
// cpu-µs/claim (process CPU time per claim, which a loaded shared host does
// not distort the way it distorts wall-clock claims/s). allocs/op, ns/op and
// cpu-µs/claim include the emulator's server side, which runs in the same
// process.
func BenchmarkClaim(b *testing.B) {
	for _, conc := range []int{1, 16, 256, 1024} {
		for _, fsync := range []bool{true, false} {
			b.Run(fmt.Sprintf("conc=%d/fsync=%s/sandboxd=sim", conc, onOff(fsync)), func(b *testing.B) {
				benchClaim(b, conc, fsync, false)
			})
		}
		b.Run(fmt.Sprintf("conc=%d/fsync=off/sandboxd=inproc", conc), func(b *testing.B) {
			benchClaim(b, conc, false, true)
		})
	}
}

// BenchmarkDuplicateCreates: per op, 1,000 duplicate Create events for one fresh
// UID, sent by 8 goroutines while its claim is in flight, make exactly one
// sandboxd claim (asserted). Reports the cost per event.
func BenchmarkDuplicateCreates(b *testing.B) {
	const events, senders = 1000, 8
	env := newSim(b, sim.Config{})
	st := openStore(b, tempStorePath(b), false)
	rep := &benchReporter{}
	e := startEngine(b, pipeline.Config{NodeKey: testKey, Sandboxd: env.root, Store: st, Reporter: rep, Logger: quiet})
	before := env.count("claim")

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		uid := "uid-sf-" + strconv.Itoa(i)
		ch := rep.expect(uid)
		it := intent("sf/p-"+strconv.Itoa(i), uid, "")
		var wg sync.WaitGroup
		for range senders {
			wg.Go(func() {
				for range events / senders {
					if err := e.Create(context.Background(), it); err != nil {
						rep.fail(err.Error())
						return
					}
				}
			})
		}
		wg.Wait()
		<-ch
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if err := rep.failure(); err != "" {
		b.Fatal(err)
	}
	if got := env.count("claim") - before; got != int64(b.N) {
		b.Fatalf("claim requests = %d for %d Pods × %d events, want exactly %d", got, b.N, events, b.N)
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*events), "ns/event")
}
