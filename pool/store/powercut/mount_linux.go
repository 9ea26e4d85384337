package powercut

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// SeedEnv, if set to a number, seeds the random choices of every power cut
// (to replay a failure whose seed a test logged).
const SeedEnv = "POWERCUT_SEED"

// Mount mounts a power-cut filesystem over backing on a new directory and
// unmounts it when the test ends. It skips the test if /dev/fuse is missing
// or mounting is not permitted, and fails it on any other error.
func Mount(t testing.TB, backing string) *FS {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("powercut: needs /dev/fuse: %v", err)
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv(SeedEnv), 10, 64); err == nil {
		seed = v
	}
	f, err := mount(backing, t.TempDir(), seed)
	switch {
	case errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES):
		t.Skipf("powercut: mounting a FUSE filesystem is not permitted here: %v", err)
	case err != nil:
		t.Fatalf("powercut: mount %s: %v", backing, err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Errorf("powercut: %v", err)
		}
	})
	return f
}

// mount serves the image in backing at mnt.
func mount(backing, mnt string, seed uint64) (*FS, error) {
	f, err := newFS(backing, seed)
	if err != nil {
		return nil, err
	}
	// Zero timeouts: the kernel asks for every name and size, so what the
	// store sees is the model's state, never a cached guess.
	var zero time.Duration
	srv, err := fs.Mount(mnt, &node{f: f, in: f.root}, &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, // mount(2) itself: no fusermount, and a clear EPERM
			FsName:            "powercut",
			Name:              "powercut",
			MaxBackground:     64,
		},
	})
	if err != nil {
		return nil, err
	}
	f.mnt = mnt
	var once bool
	f.unmount = func() error {
		if once {
			return nil
		}
		once = true
		return unmountServer(srv, mnt)
	}
	return f, nil
}

// Unmount unmounts the filesystem. Without a power cut first, it syncs
// everything to the backing directory, as a clean shutdown does. Every file
// on the mount must be closed. A second call does nothing.
func (f *FS) Unmount() error {
	if err := f.syncAll(); err != nil {
		return fmt.Errorf("powercut: sync %s at unmount: %w", f.backing, err)
	}
	return f.unmount()
}

// unmountServer unmounts mnt and waits for its server to stop. A file
// closed by another goroutine just before may still hold the mount for a
// moment (umount(2) says EBUSY): retry, then detach lazily, so that the
// kernel ends the mount once the last file is gone.
func unmountServer(srv *fuse.Server, mnt string) error {
	if err := srv.Unmount(); err == nil {
		return nil
	}
	if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", mnt, err)
	}
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("unmount %s: detached, but a file on it is still open after 30s", mnt)
	}
}
