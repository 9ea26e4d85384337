package pipeline

import (
	"context"
	"fmt"
	"log/slog"
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

// idleEngine is an engine over st that never runs (only its shards'
// queues are up, until the test ends), for calling the lease watch's
// pass directly; no row it looks at may be due.
func idleEngine(tb testing.TB, st *store.Store) *Engine {
	tb.Helper()
	e, err := New(Config{NodeKey: []byte("lease-watch-test-key-0123456789ab"), Sandboxd: idleSandboxd{}, Store: st, Reporter: idleReporter{},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, sh := range e.shards {
			sh.q.ShutDown()
		}
	})
	return e
}

// BenchmarkLeaseWatchPass is one lease-watch pass on a node that holds
// 5,000 claims, none near its deadline: "full" scans every row, as a pass
// does with a row in its renewal window; "quiet" is the pass skipped
// because nothing can be due yet, what a settled dense node pays each
// interval; "after-a-claim" is the pass after one more claim far from its
// deadline was recorded, what a node pays each interval while it claims
// (a full pass until the rows put since were looked at alone).
func BenchmarkLeaseWatchPass(b *testing.B) {
	const rows = 5000
	st, err := store.Open(filepath.Join(b.TempDir(), "claims.json"), store.Options{UnsafeNoFsync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	far := func(i int) store.Claim {
		return store.Claim{ID: fmt.Sprintf("sb-%05d", i), Token: "t", PodUID: fmt.Sprintf("uid-%05d", i),
			ClaimedAt: now, Deadline: now.Add(24 * time.Hour)}
	}
	ops := make([]store.Op, 0, rows)
	for i := range rows {
		ops = append(ops, store.Op{Key: fmt.Sprintf("ns/pod-%05d", i), Claim: far(i)})
	}
	if err := st.Apply(context.Background(), ops...); err != nil {
		b.Fatal(err)
	}
	e := idleEngine(b, st)
	ctx := context.Background()
	for _, mode := range []string{"full", "quiet", "after-a-claim"} {
		b.Run(mode, func(b *testing.B) {
			e.checkLeases(ctx, now)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				switch mode {
				case "full":
					e.leases.nextLook = time.Time{}
				case "after-a-claim": // the same row again: the table keeps its size
					b.StopTimer()
					if err := st.Put(ctx, "ns/pod-00000", far(0)); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				e.checkLeases(ctx, now)
			}
		})
	}
}
