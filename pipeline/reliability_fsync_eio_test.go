//go:build linux

package pipeline_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/internal/powercut"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// TestR4FsyncEIOFromTheSyscall: the state disk's fsync starts failing with
// EIO, from the fdatasync(2) syscall itself (the power-cut filesystem's
// FailFsync), while writes still succeed, as on a disk whose cache cannot
// be flushed. Nothing above the syscall fakes it, so a store that dropped
// the syscall's error would acknowledge the claim. Claims end Pending with
// SandboxStateWriteFailed naming the fdatasync and the EIO, never Running,
// rolled back at sandboxd; no commit is acknowledged while fsync fails.
// Once fsync works again, claims succeed, and after a power cut the reload
// holds exactly the acknowledged claims, from before and after the failure.
func TestR4FsyncEIOFromTheSyscall(t *testing.T) {
	noLeaks(t)
	backing := t.TempDir()
	fsys := powercut.Mount(t, backing)
	r := newR4Rig(t, fsys.Dir())
	ctx := context.Background()
	acked := r.claimOK(t, "before", ackedPods)

	fsys.FailFsync(false)
	failed := r.createRolledBack(t, "fsync-eio", ioErrorPods, "input/output error", "EIO")
	// The first failure is the data fsync itself, and it says so.
	if ev := r.rep.pending(t, failed[0].Ref.UID, pipeline.ReasonStateWrite, 1); !strings.Contains(ev.msg, "fdatasync") {
		t.Errorf("Pending message %q does not name the failed fdatasync", ev.msg)
	}
	if err := r.st.Put(ctx, "r4/during-eio", store.Claim{ID: "sb_x", Token: "x-token", PodUID: "uid-x"}); err == nil {
		t.Fatal("a commit was acknowledged while every fsync failed")
	}
	if st := fsys.Stats(); st.FailedFsyncs == 0 {
		t.Fatalf("no fsync reached the filesystem and failed (stats %+v): the test did not test the syscall", st)
	}

	fsys.HealFsync()
	for k, id := range r.claimOK(t, "after", ackedPods) {
		acked[k] = id
	}
	if err := fsys.PowerCut(powercut.DropUnsynced); err != nil {
		t.Fatal(err)
	}
	_ = r.st.Close() // its final write fails with the power off: expected
	if err := fsys.Unmount(); err != nil {
		t.Fatal(err)
	}
	r.path = filepath.Join(powercut.Mount(t, backing).Dir(), "state", "claims.json")
	checkReloadOnly(t, r, acked)
}
