package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// nodeKeyFile is the node secret's file name, in the state file's
// directory. The secret keys the mark every claim of this node carries in
// its claim_ref (pipeline.Identity): a VM that no row holds is this node's
// only if its mark is right. It is made once, at the first start, and
// must then live exactly as long as the state file: back the two up and
// restore them together.
const nodeKeyFile = "node.key"

// nodeKeySize is the secret's length in bytes; the file holds it as
// 2*nodeKeySize lowercase hex digits and a newline.
const nodeKeySize = 32

// NodeKeyPath is the node secret's path for the state file at statePath.
func NodeKeyPath(statePath string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(statePath)), nodeKeyFile)
}

// ReadNodeKey reads and checks the node secret of the state file at
// statePath, without the state file's lock (for tools and tests; the node
// itself uses Store.NodeKey). A missing file is an fs.ErrNotExist error.
// The error never carries the file's bytes.
func ReadNodeKey(statePath string) ([]byte, error) {
	path := NodeKeyPath(statePath)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("store: node key: %w", err)
	}
	// Exactly the hex digits and one newline: anything else is a file that
	// was damaged or replaced, and guessing at it could disown every VM
	// that no row holds.
	key := make([]byte, nodeKeySize)
	if len(b) != 2*nodeKeySize+1 || b[len(b)-1] != '\n' {
		return nil, fmt.Errorf("store: node key %s is malformed (%d bytes, want %d hex digits and a newline): restore it from the backup taken with the state file; a new key would disown every VM no row holds", path, len(b), 2*nodeKeySize)
	}
	if _, err := hex.Decode(key, b[:2*nodeKeySize]); err != nil {
		return nil, fmt.Errorf("store: node key %s is malformed (not hex): restore it from the backup taken with the state file; a new key would disown every VM no row holds", path)
	}
	return key, nil
}

// NodeKey returns the node secret next to the state file, making it on the
// first start: nodeKeySize random bytes, written to a temp file (0600),
// fsynced, linked to nodeKeyFile only if no such file exists (so that two
// nodes sharing a directory never replace each other's key), and the
// directory fsynced. An existing file that is not a well-formed key is an
// error, never replaced. The key is never logged.
func (s *Store) NodeKey() ([]byte, error) {
	key, err := ReadNodeKey(s.path)
	if !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			s.tightenNodeKey()
		}
		return key, err
	}
	key = make([]byte, nodeKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("store: node key: random: %w", err)
	}
	path := NodeKeyPath(s.path)
	tmp, err := os.CreateTemp(s.dir, nodeKeyFile+".new-*")
	if err != nil {
		return nil, fmt.Errorf("store: node key: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the link, or on failure: never a second copy
	err = tmp.Chmod(0o600)      // CreateTemp's mode is 0600 already; say it where it matters
	if err == nil {
		_, err = tmp.WriteString(hex.EncodeToString(key) + "\n")
	}
	if err == nil {
		_, err = s.syncFile(tmp)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("store: node key: write %s: %w", tmp.Name(), err)
	}
	if err := placeNodeKey(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ReadNodeKey(s.path) // another node on this directory made it first
		}
		return nil, fmt.Errorf("store: node key: %w", err)
	}
	if err := s.syncDir(); err != nil {
		// Not durable: a crash could lose the key while VMs carry its mark.
		// Refuse to start; the next start reads the file if it survived.
		return nil, fmt.Errorf("store: node key: %w", err)
	}
	s.lg.Info("created the node key: back it up with the state file", "file", path)
	return key, nil
}

// tightenNodeKey makes a restored key file that others may read 0600.
func (s *Store) tightenNodeKey() {
	path := NodeKeyPath(s.path)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	if err := os.Chmod(path, 0o600); err != nil {
		s.lg.Warn("the node key file is readable by others and cannot be made 0600", "file", path, "mode", fi.Mode().Perm().String(), "error", err)
		return
	}
	s.lg.Warn("the node key file was readable by others; made it 0600", "file", path, "was", fi.Mode().Perm().String())
}

// placeNodeKey puts the written key at path only if no file is there: a
// hard link, which fails with fs.ErrExist when another node sharing the
// directory made its key first. A file system without hard links (some
// FUSE and network file systems) gets the same rule from a lock file
// beside the key: under it, a key that is absent is renamed into place, so
// two nodes starting at once on one directory never replace each other's
// key.
func placeNodeKey(tmp, path string) error {
	err := os.Link(tmp, path)
	if !errors.Is(err, syscall.ENOTSUP) && !errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.EPERM) {
		return err
	}
	lk, lerr := lockFile(path)
	if lerr != nil {
		return fmt.Errorf("link unsupported (%v), and %w", err, lerr)
	}
	defer unlockFile(lk)
	if _, serr := os.Lstat(path); serr == nil {
		return fs.ErrExist
	} else if !errors.Is(serr, fs.ErrNotExist) {
		return serr
	}
	return os.Rename(tmp, path)
}
