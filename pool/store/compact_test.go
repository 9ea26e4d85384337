package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestCompactionBoundsTheLogAndKeepsTheTable(t *testing.T) {
	const compactMin, live = 16, 10
	path := statePath(t)
	f := newFaults()
	s := mustOpen(t, path, Options{CompactMin: compactMin, failpoint: f.failpoint})
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
	// Sequential commits of one record each: a compaction every
	// max(compactMin, 2*live)+1-live commits, each followed by a dir fsync.
	period := max(compactMin, 2*live) + 1 - live
	if n := f.reached("rename"); n < 500/period-1 || f.reached("fsyncDir") < n {
		t.Fatalf("renames %d (want about %d), directory fsyncs %d: every rename must be followed by one",
			n, 500/period, f.reached("fsyncDir"))
	}
	data, _ := os.ReadFile(path)
	if n := bytes.Count(data, []byte("\n")); n != s.records || n > max(compactMin, 2*live) {
		t.Fatalf("file holds %d records (store counted %d), bound %d", n, s.records, max(compactMin, 2*live))
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
