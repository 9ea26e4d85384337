//go:build linux

package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// TestR4DiskFull: the state filesystem fills up. Claims made meanwhile end
// Pending with SandboxStateWriteFailed, never Running, and are rolled back
// at sandboxd (zero live VMs for them). Once space is freed, the same Pods
// and new ones are claimed, and a reload holds every acknowledged claim and
// none of the failed ones.
func TestR4DiskFull(t *testing.T) {
	noLeaks(t)
	dir := smallFS(t)
	r := newR4Rig(t, dir)
	ctx := context.Background()
	acked := r.claimOK(t, "before", 3)

	filler := fill(t, dir)
	// The log's last page may still have room for a few lines; a probe row
	// uses it up, so that every later commit really meets ENOSPC. Once a
	// commit fails the store is dirty and rewrites from memory next time,
	// which needs fresh pages.
	probe := store.Claim{ID: "sb_probe", Token: "probe-token", Address: "10.0.0.1:1", PodUID: "uid-probe"}
	var perr error
	puts := 0
	for ; puts < 200 && perr == nil; puts++ {
		perr = r.st.Put(ctx, "r4/probe", probe)
	}
	if !errors.Is(perr, syscall.ENOSPC) {
		t.Fatalf("the store kept accepting commits on a full disk: last Put = %v", perr)
	}
	t.Logf("disk full after %d probe commits: %v", puts, perr)

	const failing = 3
	failed := r.createRolledBack(t, "full", failing, "no space left", "ENOSPC")
	for _, it := range failed {
		if _, ok := r.eng.Lookup(it.Ref.Key); ok {
			t.Errorf("%s: a failed claim is still in the table", it.Ref.Key)
		}
	}
	if got := r.env.count("release_ok"); got != failing {
		t.Errorf("release_ok = %d, want %d rollbacks", got, failing)
	}

	// The disk recovers: the same Pods (re-sent) and new ones are claimed.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := r.st.Delete(ctx, "r4/probe"); err != nil {
		t.Fatalf("store after the disk recovered: %v", err)
	}
	for _, it := range failed {
		create(t, r.eng, it)
		acked[string(it.Ref.Key)] = r.rep.running(t, it.Ref.UID).claim.ID
	}
	for k, id := range r.claimOK(t, "after", 2) {
		acked[k] = id
	}
	checkReload(t, r, acked)
}

// TestR4ReadOnlyStateDir: the state filesystem becomes read-only. Linux
// refuses to remount a filesystem read-only while a file on it is open for
// writing (EBUSY), and the store always holds its log open, so a running
// store cannot see EROFS: the test pins that, then covers the restart: a
// store opened on the read-only filesystem fails with a clear error (no
// engine starts, nothing is claimed), and once it is writable again the
// reload holds every acknowledged claim.
func TestR4ReadOnlyStateDir(t *testing.T) {
	noLeaks(t)
	dir := smallFS(t)
	r := newR4Rig(t, dir)
	acked := r.claimOK(t, "before", 3)

	err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, "")
	if err == nil {
		t.Fatal("remounted read-only under an open writer: the store's log is not held open for writing")
	}
	if !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("remount read-only: %v, want EBUSY", err)
	}
	acked = mergeIDs(acked, r.claimOK(t, "still-writable", 1))
	if err := r.st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only once the store closed: %v", err)
	}
	remounted := false
	t.Cleanup(func() {
		if !remounted {
			_ = syscall.Mount("", dir, "", syscall.MS_REMOUNT, "")
		}
	})
	if s, err := store.Open(r.path, store.Options{Logger: quiet}); err == nil {
		_ = s.Close()
		t.Fatal("store.Open succeeded on a read-only state directory")
	} else if !strings.Contains(err.Error(), r.path) && !strings.Contains(err.Error(), filepath.Dir(r.path)) {
		t.Errorf("Open error %q does not name the state path", err)
	}
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT, ""); err != nil {
		t.Fatalf("remount read-write: %v", err)
	}
	remounted = true
	checkReloadOnly(t, r, acked)
}

// TestR4IOErrorOnFsync: the state disk starts failing every write and
// fsync with EIO. Claims end Pending with SandboxStateWriteFailed, never
// Running, rolled back at sandboxd; the store does not treat the failure as
// harmless: no later commit is acknowledged while the disk is dead (each one
// tries to rewrite from memory and fails). After a remount, the reload holds
// exactly the claims acknowledged before the failure.
func TestR4IOErrorOnFsync(t *testing.T) {
	noLeaks(t)
	dir, remount := loopExt4(t)
	r := newR4Rig(t, dir)
	ctx := context.Background()
	acked := r.claimOK(t, "before", ackedPods)

	fd, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	flag := uint32(ext4GoingNoLogFlush)
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd.Fd(), ext4Shutdown, uintptr(unsafe.Pointer(&flag)))
	_ = fd.Close()
	if errno != 0 {
		t.Skipf("R4: EXT4_IOC_SHUTDOWN: %v", errno)
	}

	r.createRolledBack(t, "eio", ioErrorPods, "input/output error", "EIO")
	// Never "retried as if harmless": a later commit on the dead disk is
	// refused too, however often it is tried.
	for i := range 3 {
		if err := r.st.Put(ctx, "r4/after-eio", store.Claim{ID: "sb_x", Token: "x-token", PodUID: "uid-x"}); err == nil {
			t.Fatalf("commit %d after EIO was acknowledged on a dead disk", i)
		}
	}
	if _, ok := r.st.Get("r4/after-eio"); ok {
		t.Fatal("an unacknowledged commit reached the table")
	}
	_ = r.st.Close() // its final write fails on the dead disk: expected
	remount()
	checkReloadOnly(t, r, acked)
}
