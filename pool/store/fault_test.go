package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// faults fails named points of the write path on demand.
type faults struct {
	mu    sync.Mutex
	fail  map[string]int // point -> remaining failures (-1: until cleared)
	count map[string]int // point -> times reached
}

func newFaults() *faults { return &faults{fail: map[string]int{}, count: map[string]int{}} }

var errInjected = errors.New("injected I/O error")

func (f *faults) failpoint(point string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count[point]++
	switch n := f.fail[point]; {
	case n == 0:
		return nil
	case n > 0:
		f.fail[point] = n - 1
	}
	return errInjected
}

func (f *faults) set(point string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[point] = n
}

func (f *faults) reached(point string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[point]
}

// failedCommit checks the contract of a failed commit: an error naming the
// file and the cause, no token, and no row in memory.
func failedCommit(t *testing.T, s *Store, key string, err error, cause string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Put(%s) was acknowledged despite the fault", key)
	}
	if !strings.Contains(err.Error(), s.path) || !strings.Contains(err.Error(), cause) {
		t.Fatalf("error does not name the file and the cause %q: %v", cause, err)
	}
	noToken(t, "commit error", err.Error())
	if _, ok := s.Get(key); ok {
		t.Fatalf("Get(%s) shows a commit that failed", key)
	}
}

func TestFsyncFailureAcknowledgesNobodyAndTheFileIsRebuilt(t *testing.T) {
	path := statePath(t)
	f := newFaults()
	s := mustOpen(t, path, Options{failpoint: f.failpoint})
	ctx := context.Background()
	if err := s.Put(ctx, "ns/ok", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	f.set("fsyncFile", 1)
	// Bytes reach the file, the fsync fails: the nastiest case, since a
	// naive reload would find the unacknowledged row.
	failedCommit(t, s, "ns/lost", s.Put(ctx, "ns/lost", testClaim(2)), errInjected.Error())
	if err := s.Put(ctx, "ns/later", testClaim(3)); err != nil {
		t.Fatalf("Put after the fault cleared: %v", err)
	}
	if f.reached("rename") != 1 {
		t.Fatalf("the next commit did not rebuild the file (renames: %d)", f.reached("rename"))
	}
	mustClose(t, s)
	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, map[string]Claim{"ns/ok": testClaim(1), "ns/later": testClaim(3)})
}

func TestShortWriteAcknowledgesNobodyAndTheFileIsRebuilt(t *testing.T) {
	path := statePath(t)
	f := newFaults()
	s := mustOpen(t, path, Options{failpoint: f.failpoint})
	ctx := context.Background()
	if err := s.Put(ctx, "ns/ok", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	f.set("write", 1) // half the batch lands, then "ENOSPC"
	failedCommit(t, s, "ns/lost", s.Put(ctx, "ns/lost", testClaim(2)), errInjected.Error())
	if err := s.Put(ctx, "ns/later", testClaim(3)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, map[string]Claim{"ns/ok": testClaim(1), "ns/later": testClaim(3)})
}

func TestFailedRebuildFailsTheCommitToo(t *testing.T) {
	path := statePath(t)
	f := newFaults()
	s := mustOpen(t, path, Options{failpoint: f.failpoint})
	ctx := context.Background()
	if err := s.Put(ctx, "ns/ok", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	f.set("fsyncFile", 1)
	failedCommit(t, s, "ns/a", s.Put(ctx, "ns/a", testClaim(2)), errInjected.Error())
	// The rebuild before the next commit fails at each step in turn.
	for _, point := range []string{"rewrite", "fsyncFile", "rename", "fsyncDir"} {
		f.set(point, 1)
		failedCommit(t, s, "ns/b", s.Put(ctx, "ns/b", testClaim(3)), errInjected.Error())
	}
	if err := s.Put(ctx, "ns/c", testClaim(4)); err != nil {
		t.Fatalf("Put once the disk recovered: %v", err)
	}
	mustClose(t, s)
	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, map[string]Claim{"ns/ok": testClaim(1), "ns/c": testClaim(4)})
}

func TestCloseRebuildsADirtyFile(t *testing.T) {
	path := statePath(t)
	f := newFaults()
	s := mustOpen(t, path, Options{failpoint: f.failpoint})
	ctx := context.Background()
	if err := s.Put(ctx, "ns/ok", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	f.set("fsyncFile", 1)
	failedCommit(t, s, "ns/lost", s.Put(ctx, "ns/lost", testClaim(2)), errInjected.Error())
	mustClose(t, s)
	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, map[string]Claim{"ns/ok": testClaim(1)})
}

func TestFailedCompactionKeepsTheLogAndBacksOff(t *testing.T) {
	path := statePath(t)
	f := newFaults()
	obs := &countingObserver{}
	s := mustOpen(t, path, Options{failpoint: f.failpoint, CompactMin: 4, UnsafeNoFsync: true, Observer: obs})
	ctx := context.Background()
	f.set("rewrite", -1)
	for i := range 40 {
		if err := s.Put(ctx, "ns/same", testClaim(i)); err != nil {
			t.Fatalf("commit %d failed because compaction did: %v", i, err)
		}
	}
	mustClose(t, s) // waits for a compaction in flight
	// Backoff: one attempt per max(CompactMin, live) records, not per commit.
	if n := f.reached("rewrite"); n == 0 || n > 40/4+1 {
		t.Fatalf("compaction attempted %d times in 40 commits", n)
	}
	// Every attempt failed and is reported once, whether the writer saw its
	// result between two commits or Close found it still in flight (how
	// many commits the compactor takes to fail is up to the scheduler).
	if n := obs.compactFailures.Load(); n != int64(f.reached("rewrite")) || obs.compactions.Load() != 0 {
		t.Fatalf("observer saw %d failed and %d installed compactions; %d were attempted",
			n, obs.compactions.Load(), f.reached("rewrite"))
	}
	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, map[string]Claim{"ns/same": testClaim(39)})
}
