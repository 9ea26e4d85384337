package store

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The first start makes the node key: nodeKeySize random bytes in
// node.key (0600, hex and a newline) beside the state file, and no temp
// file left behind. The key is never logged.
func TestNodeKeyIsMade0600AtFirstStartAndNeverLogged(t *testing.T) {
	path := statePath(t)
	lg, logs := capture()
	s := mustOpen(t, path, Options{Logger: lg})
	defer mustClose(t, s)
	key, err := s.NodeKey()
	if err != nil {
		t.Fatalf("NodeKey: %v", err)
	}
	if len(key) != nodeKeySize || bytes.Equal(key, make([]byte, nodeKeySize)) {
		t.Fatalf("key of %d bytes, all zero: %t", len(key), bytes.Equal(key, make([]byte, nodeKeySize)))
	}
	fi, err := os.Stat(filepath.Join(filepath.Dir(path), nodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("node.key mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(NodeKeyPath(path))
	if string(b) != hex.EncodeToString(key)+"\n" {
		t.Errorf("node.key holds %d bytes that are not the key in hex and a newline", len(b))
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), nodeKeyFile+".new-") {
			t.Errorf("temp file %s left behind", e.Name())
		}
	}
	if !strings.Contains(logs.String(), "created the node key") {
		t.Errorf("the key's creation is not logged: %s", logs.String())
	}
	for _, form := range []string{hex.EncodeToString(key), string(key)} {
		if strings.Contains(logs.String(), form) {
			t.Fatalf("the node key is in the log: %s", logs.String())
		}
	}
}

// A restart reads the same key back, and ReadNodeKey (no lock) agrees.
func TestNodeKeyIsReusedOnRestart(t *testing.T) {
	path := statePath(t)
	s := mustOpen(t, path, Options{UnsafeNoFsync: true})
	first, err := s.NodeKey()
	if err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	again, err := s.NodeKey()
	if err != nil {
		t.Fatal(err)
	}
	read, err := ReadNodeKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) || !bytes.Equal(first, read) {
		t.Fatal("the node key changed across a restart")
	}
}

// A damaged key file is a startup error that says what to do, never a new
// key: a new key would disown every VM that no row holds. The file is left
// as it was, and its bytes are not in the error.
func TestACorruptNodeKeyIsRefusedNeverReplaced(t *testing.T) {
	good := strings.Repeat("ab", nodeKeySize)
	for name, body := range map[string]string{
		"empty":       "",
		"short":       good[:40] + "\n",
		"no newline":  good,
		"not hex":     strings.Repeat("zz", nodeKeySize) + "\n",
		"extra bytes": good + "\nmore\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := statePath(t)
			if err := os.WriteFile(NodeKeyPath(path), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			s := mustOpen(t, path, Options{UnsafeNoFsync: true})
			defer mustClose(t, s)
			_, err := s.NodeKey()
			if err == nil || !strings.Contains(err.Error(), "malformed") || !strings.Contains(err.Error(), "restore it from the backup") {
				t.Fatalf("NodeKey = %v, want a malformed-key error that says to restore the backup", err)
			}
			if body != "" && strings.Contains(err.Error(), strings.TrimSpace(body)) {
				t.Fatalf("the error carries the file's bytes: %v", err)
			}
			if b, _ := os.ReadFile(NodeKeyPath(path)); string(b) != body {
				t.Fatal("the damaged key file was changed")
			}
		})
	}
}

// A restored key file that others may read is made 0600.
func TestARestoredNodeKeyIsMadePrivate(t *testing.T) {
	path := statePath(t)
	want := bytes.Repeat([]byte{7}, nodeKeySize)
	if err := os.WriteFile(NodeKeyPath(path), []byte(hex.EncodeToString(want)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(NodeKeyPath(path), 0o644); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, path, Options{UnsafeNoFsync: true})
	defer mustClose(t, s)
	got, err := s.NodeKey()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("NodeKey = %x, %v; want the restored key", got, err)
	}
	if fi, _ := os.Stat(NodeKeyPath(path)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
}

// Without a key file, ReadNodeKey says so (fs.ErrNotExist), and makes none.
func TestReadNodeKeyNeverMakesOne(t *testing.T) {
	path := statePath(t)
	if _, err := ReadNodeKey(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadNodeKey = %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(NodeKeyPath(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("ReadNodeKey made a key file")
	}
}
