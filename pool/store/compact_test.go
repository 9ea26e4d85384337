package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCompactionBoundsTheLogAndKeepsTheTable(t *testing.T) {
	const compactMin, live = 16, 10
	path := statePath(t)
	f := newFaults()
	obs := &countingObserver{}
	s := mustOpen(t, path, Options{CompactMin: compactMin, failpoint: f.failpoint, Observer: obs})
	ctx := context.Background()
	want := map[string]Claim{}
	for i := range 500 {
		k := fmt.Sprintf("ns/p%d", i%live)
		if err := s.Put(ctx, k, testClaim(i)); err != nil {
			t.Fatal(err)
		}
		want[k] = testClaim(i)
	}
	mustClose(t, s) // the writer has stopped: its fields are safe to read
	// Sequential commits of one record each: a compaction starts every
	// max(compactMin, 2*live)+1-live commits, and the writer installs it a
	// few commits later, once its snapshot is durable. So the log exceeds
	// the bound only by the commits of one compaction in flight.
	bound := max(compactMin, 2*live)
	period := bound + 1 - live
	if n := f.reached("rename"); n < 500/(2*period) || f.reached("fsyncDir") < n {
		t.Fatalf("renames %d (want about %d), directory fsyncs %d: every rename must be followed by one",
			n, 500/period, f.reached("fsyncDir"))
	}
	if n := obs.compactions.Load(); n != int64(f.reached("rename")) || obs.compactFailures.Load() != 0 {
		t.Fatalf("observer saw %d compactions (%d failed), the file was renamed %d times",
			n, obs.compactFailures.Load(), f.reached("rename"))
	}
	data, _ := os.ReadFile(path)
	// The compacted file is a current log: a header, then groups that each
	// end with their marker (the reopen below checks that they match).
	if l := lines(t, data); l[len(l)-1].kind != 'm' {
		t.Fatal("compacted log does not end with a commit marker")
	}
	if n := countRecords(t, data); n != s.records || n > 2*bound {
		t.Fatalf("file holds %d records (store counted %d), bound %d plus one compaction's worth", n, s.records, bound)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("compacted file mode %v", fi.Mode().Perm())
	}
	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, want)
}

func TestStaleCompactionTempFilesAreRemovedAtOpen(t *testing.T) {
	for _, base := range []string{"claims.json", "cl[a]*ms.json"} { // glob metacharacters too
		dir := t.TempDir()
		path := filepath.Join(dir, base)
		stale := filepath.Join(dir, base+".tmp-123456")
		other := filepath.Join(dir, "unrelated.tmp-1")
		for _, p := range []string{stale, other} {
			if err := os.WriteFile(p, []byte("partial snapshot"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s := mustOpen(t, path, Options{})
		mustClose(t, s)
		if _, err := os.Stat(stale); !os.IsNotExist(err) {
			t.Fatalf("%s: stale temp file survived Open: %v", base, err)
		}
		if _, err := os.Stat(other); err != nil {
			t.Fatalf("%s: a file the store does not own was removed: %v", base, err)
		}
	}
}

func TestCommitsGoOnWhileACompactionRunsAndSurviveTheSwitch(t *testing.T) {
	path := statePath(t)
	h := newHeldCompactor()
	s := mustOpen(t, path, Options{CompactMin: 8, failpoint: h.failpoint, Logger: quiet()})
	ctx := context.Background()
	want := map[string]Claim{}
	put := func(i int) {
		t.Helper()
		k := fmt.Sprintf("ns/p%d", i%4)
		if err := s.Put(ctx, k, testClaim(i)); err != nil {
			t.Fatal(err)
		}
		want[k] = testClaim(i)
	}
	i := 0
	for ; i < 9; i++ { // crosses max(CompactMin, 2*live) = 8
		put(i)
	}
	select {
	case <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no compaction started after crossing the threshold")
	}
	// The compactor is stuck in its snapshot: commits must still be
	// acknowledged, from the old log. They form the tail.
	for ; i < 40; i++ {
		put(i)
	}
	close(h.release)
	// The writer installs the new file between two batches once the snapshot
	// is durable; commit until the log has been replaced.
	before, _ := os.Stat(path)
	deadline := time.Now().Add(10 * time.Second)
	for ; ; i++ {
		put(i)
		now, _ := os.Stat(path)
		if !os.SameFile(before, now) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the compaction was never installed")
		}
	}
	put(i + 1) // appended to the new file
	mustClose(t, s)
	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, want)
}

func TestAFailedCommitAbandonsTheCompactionInFlight(t *testing.T) {
	path := statePath(t)
	h := newHeldCompactor()
	s := mustOpen(t, path, Options{CompactMin: 8, failpoint: h.failpoint, Logger: quiet()})
	ctx := context.Background()
	for i := range 9 {
		if err := s.Put(ctx, fmt.Sprintf("ns/p%d", i%4), testClaim(i)); err != nil {
			t.Fatal(err)
		}
	}
	<-h.entered
	h.failWrite.Store(true)
	if err := s.Put(ctx, "ns/lost", testClaim(100)); err == nil {
		t.Fatal("a commit whose write failed was acknowledged")
	}
	close(h.release) // the rebuild waits for the compactor before it drops its file
	if err := s.Put(ctx, "ns/kept", testClaim(101)); err != nil {
		t.Fatalf("the commit after a failed one did not rebuild the file: %v", err)
	}
	mustClose(t, s)
	if temps, _ := filepath.Glob(path + ".tmp-*"); len(temps) != 0 {
		t.Fatalf("temp files left behind: %v", temps)
	}
	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	want := map[string]Claim{"ns/kept": testClaim(101)}
	for i := 5; i < 9; i++ {
		want[fmt.Sprintf("ns/p%d", i%4)] = testClaim(i)
	}
	checkTable(t, s, want)
}
