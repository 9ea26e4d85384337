package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// Stand-ins that are never called, as no row below is due; sandboxd's
// features are unknown (so every claim counts as renewable).
type (
	idleSandboxd struct{ Sandboxd }
	idleReporter struct{ Reporter }
)

func (idleSandboxd) Features() (pool.Features, bool) { return pool.Features{}, false }

// BenchmarkLeaseWatchPass is one lease-watch pass on a node that holds
// 5,000 claims, none near its deadline: "full" scans every row, as every
// pass did before quiet passes and as a pass still does after a commit;
// "quiet" is the pass skipped because nothing changed and nothing can be
// due yet, what a settled dense node now pays each interval.
func BenchmarkLeaseWatchPass(b *testing.B) {
	const rows = 5000
	st, err := store.Open(filepath.Join(b.TempDir(), "claims.json"), store.Options{UnsafeNoFsync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	ops := make([]store.Op, 0, rows)
	for i := range rows {
		ops = append(ops, store.Op{Key: fmt.Sprintf("ns/pod-%05d", i), Claim: store.Claim{
			ID: fmt.Sprintf("sb-%05d", i), Token: "t", PodUID: fmt.Sprintf("uid-%05d", i),
			ClaimedAt: now, Deadline: now.Add(24 * time.Hour)}})
	}
	if err := st.Apply(context.Background(), ops...); err != nil {
		b.Fatal(err)
	}
	e, err := New(Config{Sandboxd: idleSandboxd{}, Store: st, Reporter: idleReporter{}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { // the engine never runs: only its shards' queues are up
		for _, sh := range e.shards {
			sh.q.ShutDown()
		}
	}()
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		full bool
	}{{"full", true}, {"quiet", false}} {
		b.Run(bc.name, func(b *testing.B) {
			e.checkLeases(ctx, now)
			b.ReportAllocs()
			for b.Loop() {
				if bc.full {
					e.leases.nextLook = time.Time{}
				}
				e.checkLeases(ctx, now)
			}
		})
	}
}
