package powercut

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// MountAt is Mount for a caller that manages the mount itself, such as a
// test that restarts a process on the same state path after each power
// cut: it serves the image in backing at mnt (an existing empty
// directory), seeds the random choices with seed, and returns an error
// where Mount would skip or fail the test. The caller unmounts.
func MountAt(backing, mnt string, seed uint64) (*FS, error) { return mount(backing, mnt, seed) }

// Available reports why a power-cut filesystem cannot be mounted here (no
// /dev/fuse, or no right to mount), or nil if it can: it mounts and
// unmounts an empty one under scratch.
func Available(scratch string) error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("powercut: needs /dev/fuse: %w", err)
	}
	backing, mnt := filepath.Join(scratch, "probe-backing"), filepath.Join(scratch, "probe-mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	f, err := mount(backing, mnt, 1)
	if err != nil {
		return fmt.Errorf("powercut: cannot mount a FUSE filesystem here: %w", err)
	}
	return f.Unmount()
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
	var st syscall.Stat_t
	if err := syscall.Stat(mnt, &st); err != nil {
		srv.Unmount()
		return nil, err
	}
	conn := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", minor(st.Dev))
	var once bool
	f.unmount = func() error {
		if once {
			return nil
		}
		once = true
		return f.unmountServer(srv, conn)
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

// unmountServer unmounts the filesystem and waits for its server to stop.
// A file closed by another goroutine just before may still hold the mount
// for a moment (umount(2) says EBUSY): retry for a while, answering every
// request with EIO meanwhile. A file still open after that is a leak, and a
// dangerous one: this process serves the mount, so when it exits, closing
// that file waits for an answer nobody can give, forever. So then detach
// the mount and abort its connection (through fusectl, if mounted), which
// fails whatever is left, and report the leak.
func (f *FS) unmountServer(srv *fuse.Server, conn string) error {
	f.mu.Lock()
	if !f.dead {
		f.dead = true
		close(f.off)
	}
	f.mu.Unlock()
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if err = srv.Unmount(); err == nil {
			return nil
		}
	}
	if derr := syscall.Unmount(f.mnt, syscall.MNT_DETACH); derr != nil {
		return fmt.Errorf("unmount %s: %v; detach: %w", f.mnt, err, derr)
	}
	if werr := os.WriteFile(conn, []byte("1"), 0); werr != nil {
		return fmt.Errorf("unmount %s: a file on it is still open (%v); detached it, but could not abort its connection (%v): "+
			"this process may hang when it exits", f.mnt, err, werr)
	}
	srv.Wait()
	return fmt.Errorf("unmount %s: a file on it was still open (%v); detached it and aborted its connection", f.mnt, err)
}

// minor is the minor number of a Linux dev_t, which names a FUSE
// connection under /sys/fs/fuse/connections.
func minor(dev uint64) uint64 { return dev&0xff | (dev>>12)&0xfff00 }
