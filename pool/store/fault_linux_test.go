package store

import (
	"context"
	"os"
	"syscall"
	"testing"
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
