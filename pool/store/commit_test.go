package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingObserver records every group commit and compaction.
type countingObserver struct {
	commits, acked, maxBatch, fsyncNanos atomic.Int64
	compactions, compactFailures         atomic.Int64
}

func (o *countingObserver) Compact(records int, took time.Duration, err error) {
	if err != nil {
		o.compactFailures.Add(1)
		return
	}
	o.compactions.Add(1)
}

func (o *countingObserver) Commit(batch, bytes int, fsync time.Duration) {
	o.commits.Add(1)
	o.fsyncNanos.Add(int64(fsync))
	o.acked.Add(int64(batch))
	for {
		m := o.maxBatch.Load()
		if int64(batch) <= m || o.maxBatch.CompareAndSwap(m, int64(batch)) {
			return
		}
	}
}

func TestConcurrentCommitsAreAllDurable(t *testing.T) {
	const workers, perWorker = 64, 40
	path := statePath(t)
	s := mustOpen(t, path, Options{CompactMin: 64}) // compact several times on the way
	ctx := context.Background()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		want = map[string]Claim{}
	)
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			local := map[string]Claim{}
			for i := range perWorker {
				// Each worker owns its keys, so its own order is the order.
				k := fmt.Sprintf("ns/w%02d-k%d", w, i%7)
				if i%5 == 4 {
					if err := s.Delete(ctx, k); err != nil {
						t.Error(err)
						return
					}
					delete(local, k)
					continue
				}
				c := testClaim(w*1000 + i)
				if err := s.Put(ctx, k, c); err != nil {
					t.Error(err)
					return
				}
				if g, ok := s.Get(k); !ok || !sameClaim(g, c) {
					t.Errorf("Get(%s) right after its Put returned: %+v %v", k, g, ok)
				}
				local[k] = c
			}
			mu.Lock()
			for k, c := range local {
				want[k] = c
			}
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	checkTable(t, s, want)
	mustClose(t, s)

	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, want)
	t.Logf("%d workers x %d ops: %d rows after reopen", workers, perWorker, len(want))
}

func TestGroupCommitSharesFsyncs(t *testing.T) {
	const n = 64
	obs := &countingObserver{}
	s := mustOpen(t, statePath(t), Options{Observer: obs}) // real fsyncs
	defer mustClose(t, s)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			if err := s.Put(context.Background(), fmt.Sprintf("ns/%d", i), testClaim(i)); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	commits, acked, maxBatch := obs.commits.Load(), obs.acked.Load(), obs.maxBatch.Load()
	t.Logf("%d concurrent puts: %d group commits, largest batch %d", n, commits, maxBatch)
	if acked != n {
		t.Fatalf("observer saw %d acknowledged callers, want %d", acked, n)
	}
	if commits >= n || maxBatch < 2 {
		t.Fatalf("%d puts took %d commits (largest batch %d): fsyncs are not shared", n, commits, maxBatch)
	}
}

func TestApplyIsOneGroupCommit(t *testing.T) {
	obs := &countingObserver{}
	s := mustOpen(t, statePath(t), Options{Observer: obs, UnsafeNoFsync: true})
	defer mustClose(t, s)
	err := s.Apply(context.Background(),
		Op{Key: "ns/a", Claim: testClaim(1)},
		Op{Key: "ns/b", Claim: testClaim(2)},
		Op{Key: "ns/a", Delete: true})
	if err != nil {
		t.Fatal(err)
	}
	if obs.commits.Load() != 1 {
		t.Fatalf("Apply took %d commits", obs.commits.Load())
	}
	if _, ok := s.Get("ns/a"); ok || s.Len() != 1 {
		t.Fatal("ops were not applied in order")
	}
}

func TestGetNeverShowsACommitBeforeItIsDurable(t *testing.T) {
	b := newBlockingFsync()
	s := mustOpen(t, statePath(t), Options{failpoint: b.failpoint})
	defer mustClose(t, s)
	b.armed.Store(true)
	errc := make(chan error, 1)
	go func() { errc <- s.Put(context.Background(), "ns/a", testClaim(1)) }()
	<-b.entered // written, not yet fsynced
	if _, ok := s.Get("ns/a"); ok {
		t.Fatal("Get returned a row whose fsync has not returned")
	}
	close(b.release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("ns/a"); !ok {
		t.Fatal("row missing after Put returned")
	}
}

func TestContextEndingAfterTheWriterTookARequestStillReportsItsOutcome(t *testing.T) {
	b := newBlockingFsync()
	s := mustOpen(t, statePath(t), Options{failpoint: b.failpoint})
	defer mustClose(t, s)
	b.armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Put(ctx, "ns/a", testClaim(1)) }()
	<-b.entered
	cancel()
	within(t, "Put to see its context end and wait for the taken request", b.waiting)
	close(b.release)
	if err := <-errc; err != nil {
		t.Fatalf("Put whose commit became durable returned %v", err)
	}
	if _, ok := s.Get("ns/a"); !ok {
		t.Fatal("row missing")
	}
}

func TestContextEndingBeforeTheWriterTookARequestWithdrawsIt(t *testing.T) {
	b := newBlockingFsync()
	s := mustOpen(t, statePath(t), Options{failpoint: b.failpoint})
	defer mustClose(t, s)
	b.armed.Store(true)
	first := make(chan error, 1)
	go func() { first <- s.Put(context.Background(), "ns/first", testClaim(1)) }()
	<-b.entered // the writer is busy with "first"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.Put(ctx, "ns/queued", testClaim(2)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued Put: %v, want DeadlineExceeded", err)
	}
	close(b.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// A later commit goes through; the withdrawn one never lands.
	if err := s.Put(context.Background(), "ns/later", testClaim(3)); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("ns/queued"); ok {
		t.Fatal("a withdrawn request was committed")
	}
}
