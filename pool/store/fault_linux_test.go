package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonstack/vk-sandbox/internal/powercut"
)

func TestWriteToAFileClosedBehindTheStoresBackFailsThenRecovers(t *testing.T) {
	path := statePath(t)
	s := mustOpen(t, path, Options{})
	ctx := context.Background()
	if err := s.Put(ctx, "ns/ok", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	// A real kernel error (EBADF) from write(2), not an injected one: put a
	// read-only descriptor in place of the log's. (Closing it instead would
	// let the rebuild's temp file reuse the number.) No commit is in flight,
	// so the writer is not using the descriptor.
	ro, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := syscall.Dup3(int(ro.Fd()), int(s.f.Fd()), syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	failedCommit(t, s, "ns/lost", s.Put(ctx, "ns/lost", testClaim(2)), "bad file descriptor")
	if err := s.Put(ctx, "ns/later", testClaim(3)); err != nil {
		t.Fatalf("Put after the rebuild: %v", err)
	}
	mustClose(t, s)
	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, map[string]Claim{"ns/ok": testClaim(1), "ns/later": testClaim(3)})
}

// A real EIO from fdatasync(2), from a powercut filesystem: the failed
// group's pages are then clean in the page cache but not on disk, as Linux
// leaves them after a writeback error, so a second fsync of the same file
// would succeed and prove nothing (and a later group's fsync would persist
// the size over the hole). The store must fail the commit, show nothing of
// it, and rebuild the file from memory before the next commit; after a
// power cut, exactly the acknowledged rows are there.
func TestFsyncEIOFromTheDiskFailsTheCommitAndTheFileIsRebuilt(t *testing.T) {
	backing := t.TempDir()
	fsys := powercut.Mount(t, backing)
	path := filepath.Join(fsys.Dir(), "claims.json")
	s := mustOpen(t, path, Options{})
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.Put(ctx, "ns/ok", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(path)
	fsys.FailFsync(true)
	err := s.Put(ctx, "ns/lost", testClaim(2))
	failedCommit(t, s, "ns/lost", err, "input/output error")
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("Put: %v, want the EIO of the syscall", err)
	}
	if err := s.Put(ctx, "ns/later", testClaim(3)); err != nil {
		t.Fatalf("Put after the failure: %v", err)
	}
	if now, _ := os.Stat(path); os.SameFile(before, now) {
		t.Fatal("the commit after a failed fsync appended to the same file instead of rebuilding it")
	}
	if st := fsys.Stats(); st.FailedFsyncs != 1 {
		t.Fatalf("filesystem saw %+v, want one failed fsync", st)
	}
	checkAfterPowerCut(t, fsys, backing, s, map[string]Claim{"ns/ok": testClaim(1), "ns/later": testClaim(3)})
}

// With every fsync failing, every commit fails (the rebuild cannot
// complete either) and Close reports it; the acknowledged rows survive a
// power cut.
func TestFsyncEIOFromThenOnFailsEveryCommit(t *testing.T) {
	backing := t.TempDir()
	fsys := powercut.Mount(t, backing)
	path := filepath.Join(fsys.Dir(), "claims.json")
	s := mustOpen(t, path, Options{})
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.Put(ctx, "ns/ok", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	fsys.FailFsync(false)
	for i, key := range []string{"ns/a", "ns/b", "ns/c"} {
		failedCommit(t, s, key, s.Put(ctx, key, testClaim(10+i)), "input/output error")
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("Close of a store it could not rebuild: %v, want the EIO", err)
	}
	checkAfterPowerCut(t, fsys, backing, nil, map[string]Claim{"ns/ok": testClaim(1)})
}

// checkAfterPowerCut cuts the power under s (if not closed yet), remounts
// backing and checks that the store there holds exactly want.
func checkAfterPowerCut(t *testing.T, fsys *powercut.FS, backing string, s *Store, want map[string]Claim) {
	t.Helper()
	if err := fsys.PowerCut(powercut.DropUnsynced); err != nil {
		t.Fatal(err)
	}
	if s != nil {
		s.Close() // the disk is gone: it fails, and releases the lock
	}
	if err := fsys.Unmount(); err != nil {
		t.Fatal(err)
	}
	fsys = powercut.Mount(t, backing)
	s = mustOpen(t, filepath.Join(fsys.Dir(), "claims.json"), Options{})
	defer mustClose(t, s)
	checkTable(t, s, want)
}
