package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cocoonstack/vk-sandbox/internal/powercut"
)

// A state directory on a file system without hard links (the powercut FUSE
// file system is one, like some network file systems) still gets its node
// key: placed under a lock file by a rename, kept across a restart, and
// never replacing a key that is already there.
func TestANodeKeyIsMadeOnAFileSystemWithoutHardLinks(t *testing.T) {
	fsys := powercut.Mount(t, t.TempDir())
	dir := filepath.Join(fsys.Dir(), "state")
	path := filepath.Join(dir, "claims.json")
	s := mustOpen(t, path, Options{})
	t.Cleanup(func() { s.Close() })
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(probe, probe+".link"); err == nil {
		t.Fatal("the powercut file system made a hard link: this test no longer covers a file system without them")
	}
	first, err := s.NodeKey()
	if err != nil {
		t.Fatalf("node key on a file system without hard links: %v", err)
	}
	fi, err := os.Stat(NodeKeyPath(path))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node key file: %v, %v; want mode 0600", fi, err)
	}
	if err := placeNodeKey(probe, NodeKeyPath(path)); !os.IsExist(err) {
		t.Fatalf("placing a key over an existing one = %v, want it refused as existing", err)
	}
	mustClose(t, s)
	s = mustOpen(t, path, Options{})
	again, err := s.NodeKey()
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("node key after a restart: %v (same: %v)", err, bytes.Equal(first, again))
	}
}
