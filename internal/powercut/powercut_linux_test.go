package powercut

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func write(t *testing.T, path string, data []byte, syncFile bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if syncFile {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func cut(t *testing.T, f *FS, m Mode) {
	t.Helper()
	if err := f.PowerCut(m); err != nil {
		t.Fatal(err)
	}
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) ([]byte, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

func TestOnlySyncedWritesSurviveAPowerCut(t *testing.T) {
	backing := t.TempDir()
	f := Mount(t, backing)
	p := filepath.Join(f.Dir(), "log")
	write(t, p, []byte("durable "), true)
	syncDir(t, f.Dir())
	write(t, p, []byte("lost"), false)
	if got, _ := read(t, p); string(got) != "durable lost" {
		t.Fatalf("reads see %q, want the page cache", got)
	}
	if got, _ := read(t, filepath.Join(backing, "log")); string(got) != "durable " {
		t.Fatalf("backing holds %q before the cut, want only the synced bytes", got)
	}
	if err := f.PowerCut(DropUnsynced); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(p); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read after the power cut: %v, want EIO", err)
	}
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, filepath.Join(backing, "log")); string(got) != "durable " {
		t.Fatalf("after the cut the file holds %q", got)
	}
	f = Mount(t, backing)
	if got, _ := read(t, filepath.Join(f.Dir(), "log")); string(got) != "durable " {
		t.Fatalf("remounted, the file holds %q", got)
	}
}

func TestNamespaceChangesNeedTheirDirectorysFsync(t *testing.T) {
	backing := t.TempDir()
	f := Mount(t, backing)
	write(t, filepath.Join(f.Dir(), "state"), []byte("old"), true)
	syncDir(t, f.Dir())
	// A new file, fsynced, renamed over the old one: nothing of it is
	// durable until the directory is synced.
	tmp := filepath.Join(f.Dir(), "tmp")
	write(t, tmp, []byte("new"), true)
	if err := os.Rename(tmp, filepath.Join(f.Dir(), "state")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.Dir(), "created"), []byte("x"), true)
	cut(t, f, DropUnsynced)
	if got, _ := read(t, filepath.Join(backing, "state")); string(got) != "old" {
		t.Fatalf("an unsynced rename survived: state holds %q", got)
	}
	for _, name := range []string{"tmp", "created"} {
		if _, ok := read(t, filepath.Join(backing, name)); ok {
			t.Fatalf("%s exists although its directory was never synced", name)
		}
	}

	f = Mount(t, backing)
	write(t, tmp, nil, false)
	tmp = filepath.Join(f.Dir(), "tmp")
	write(t, tmp, []byte("new"), true)
	if err := os.Rename(tmp, filepath.Join(f.Dir(), "state")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Dir())
	cut(t, f, DropUnsynced)
	if got, _ := read(t, filepath.Join(backing, "state")); string(got) != "new" {
		t.Fatalf("a synced rename was lost: state holds %q", got)
	}
}

func TestFailedFsyncIsEIOAndItsPagesAreLost(t *testing.T) {
	backing := t.TempDir()
	f := Mount(t, backing)
	p := filepath.Join(f.Dir(), "log")
	write(t, p, []byte("a"), true)
	syncDir(t, f.Dir())
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	lost := bytes.Repeat([]byte("b"), 2*sectorSize-1) // the rest of sectors 0 and 1
	if _, err := fh.Write(lost); err != nil {
		t.Fatal(err)
	}
	f.FailFsync(true)
	if err := fh.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync: %v, want EIO", err)
	}
	// Once: the next fsync works, but the sectors of the failed one are
	// clean in the cache and never reach the disk (unless written again),
	// while the new size does.
	if _, err := fh.Write([]byte("c")); err != nil { // sector 2
		t.Fatal(err)
	}
	if err := fh.Sync(); err != nil {
		t.Fatalf("fsync after a failure that was once: %v", err)
	}
	if got, _ := read(t, p); string(got) != "a"+string(lost)+"c" {
		t.Fatalf("reads see %q", got)
	}
	f.FailFsync(false)
	for range 3 {
		if err := fh.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("fsync while failing: %v, want EIO", err)
		}
	}
	f.HealFsync()
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.FailedFsyncs != 4 {
		t.Fatalf("stats %+v, want 4 failed fsyncs", st)
	}
	fh.Close()
	cut(t, f, DropUnsynced)
	if got, _ := read(t, filepath.Join(backing, "log")); string(got) != "a"+string(make([]byte, len(lost)))+"c" {
		t.Fatalf("after the cut the file holds %q, want the lost pages as zeros", got)
	}
}

// A power cut that keeps some pages keeps whole pages, in any subset, and
// the file's new size or its old one.
func TestKeepSomePagesKeepsWholePagesInAnySubset(t *testing.T) {
	backing := t.TempDir()
	const pages = 16
	seen := map[string]bool{}
	for round := 0; round < 40 && len(seen) < 4; round++ {
		os.RemoveAll(filepath.Join(backing, "log"))
		f := Mount(t, backing)
		p := filepath.Join(f.Dir(), "log")
		write(t, p, nil, true)
		syncDir(t, f.Dir())
		write(t, p, bytes.Repeat([]byte{0xff}, pages*pageSize), false)
		cut(t, f, KeepSomePages)
		got, _ := read(t, filepath.Join(backing, "log"))
		switch len(got) {
		case 0:
			seen["old size"] = true
			continue
		case pages * pageSize:
			seen["new size"] = true
		default:
			t.Fatalf("size %d after the cut, want 0 or %d", len(got), pages*pageSize)
		}
		for i := 0; i < len(got); i += pageSize {
			switch pg := got[i : i+pageSize]; {
			case bytes.Equal(pg, bytes.Repeat([]byte{0xff}, pageSize)):
				seen["kept page"] = true
			case bytes.Equal(pg, make([]byte, pageSize)):
				seen["lost page"] = true
			default:
				t.Fatalf("page %d is neither written nor zero: a cut tore a page", i/pageSize)
			}
		}
	}
	if len(seen) < 4 {
		t.Fatalf("40 cuts showed only %v", seen)
	}
}

func TestCleanUnmountSyncsEverything(t *testing.T) {
	backing := t.TempDir()
	f := Mount(t, backing)
	if err := os.Mkdir(filepath.Join(f.Dir(), "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.Dir(), "d", "x"), []byte("unsynced"), false)
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, filepath.Join(backing, "d", "x")); string(got) != "unsynced" {
		t.Fatalf("clean unmount left %q", got)
	}
}

func TestFlockExcludesASecondHolder(t *testing.T) {
	f := Mount(t, t.TempDir())
	p := filepath.Join(f.Dir(), "lock")
	var fds []*os.File
	for range 2 {
		fd, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer fd.Close()
		fds = append(fds, fd)
	}
	if err := syscall.Flock(int(fds[0].Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(fds[1].Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("second flock: %v, want EWOULDBLOCK", err)
	}
}

func TestPowerCutAtTheNthFsyncCutsBeforeIt(t *testing.T) {
	backing := t.TempDir()
	f := Mount(t, backing)
	p := filepath.Join(f.Dir(), "log")
	write(t, p, []byte("one "), true)
	syncDir(t, f.Dir())
	f.PowerCutAt(OpFsync, 2, DropUnsynced)
	write(t, p, []byte("two "), true) // the first fsync counted: it works
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Write([]byte("three")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Off():
		t.Fatal("power off before the armed fsync")
	default:
	}
	if err := fh.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("armed fsync: %v, want EIO", err)
	}
	<-f.Off()
	if err := f.Err(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, filepath.Join(backing, "log")); string(got) != "one two " {
		t.Fatalf("after the cut the file holds %q", got)
	}
}
