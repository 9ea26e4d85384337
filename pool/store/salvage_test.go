package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// salvageSource writes a version 2 log with one group per key, in order,
// and returns its path and the byte offset and line of each key's record.
func salvageSource(t *testing.T, keys ...string) (string, map[string]int64, map[string]int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "claims.json")
	s, err := Open(path, Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, k := range keys {
		c := Claim{ID: "sb-" + k, Token: "tok-secret-" + k, PodUID: "uid-" + k, ClaimedAt: now, Deadline: now.Add(time.Hour)}
		if err := s.Put(context.Background(), k, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	offs, lines := map[string]int64{}, map[string]int{}
	var off int64
	for i, l := range bytes.SplitAfter(data, []byte("\n")) {
		for _, k := range keys {
			if bytes.Contains(l, []byte(`"key":"`+k+`"`)) {
				offs[k], lines[k] = off, i+1
			}
		}
		off += int64(len(l))
	}
	return path, offs, lines
}

// A record damaged in the middle of the log stops Open; Salvage keeps the
// records around it in a new file that Open loads, reports the damaged
// one by line and offset without a token, and leaves the source as it was.
func TestSalvageKeepsRecordsAroundMiddleDamage(t *testing.T) {
	src, offs, lines := salvageSource(t, "ns/a", "ns/b", "ns/c")
	data, _ := os.ReadFile(src)
	// Flip a byte of ns/b's token: its checksum no longer verifies.
	i := bytes.Index(data, []byte("tok-secret-ns/b"))
	data[i] ^= 0x20
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(src, old, old); err != nil {
		t.Fatal(err)
	}
	var ce *corruptError
	if _, err := Open(src, Options{UnsafeNoFsync: true}); !errors.As(err, &ce) {
		t.Fatalf("Open of the damaged file: %v, want a *corruptError", err)
	}

	dst := filepath.Join(t.TempDir(), "salvaged", "claims.json")
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	rep, err := Salvage(src, dst, Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Kept != 2 || rep.Version != formatVersion || len(rep.Lost) != 1 {
		t.Fatalf("report %+v: want 2 kept of a version 2 log, 1 lost", rep)
	}
	if l := rep.Lost[0]; l.Line != lines["ns/b"] || l.Offset != offs["ns/b"] {
		t.Errorf("lost %+v: want line %d, offset %d", l, lines["ns/b"], offs["ns/b"])
	}
	if bytes.Contains([]byte(fmt.Sprintf("%+v", rep)), []byte("tok-secret")) {
		t.Errorf("the report holds a token: %+v", rep)
	}

	after, _ := os.ReadFile(src)
	st, _ := os.Stat(src)
	if !bytes.Equal(after, data) || !st.ModTime().Equal(old) {
		t.Errorf("the source changed: bytes equal %v, mtime %v want %v", bytes.Equal(after, data), st.ModTime(), old)
	}

	dst0, _ := os.Stat(dst)
	if dst0.Mode().Perm() != 0o600 {
		t.Errorf("salvaged file mode %v, want 0600", dst0.Mode().Perm())
	}
	s, err := Open(dst, Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("Open of the salvaged file: %v", err)
	}
	defer s.Close()
	for k, want := range map[string]bool{"ns/a": true, "ns/b": false, "ns/c": true} {
		c, ok := s.Get(k)
		if ok != want || (ok && c.Token != "tok-secret-"+k) {
			t.Errorf("salvaged %s: %+v, %v; want present %v with its token", k, c, ok, want)
		}
	}

	if _, err := Salvage(src, dst, Options{UnsafeNoFsync: true}); !errors.Is(err, os.ErrExist) {
		t.Errorf("salvage onto an existing file: %v, want it refused", err)
	}
}

// Records after the last commit marker were never acknowledged: Salvage
// reports them with their key and ID and does not keep them, as Open
// drops a torn tail.
func TestSalvageDropsTheUnacknowledgedTail(t *testing.T) {
	src, _, _ := salvageSource(t, "ns/a", "ns/b")
	data, _ := os.ReadFile(src)
	// Cut the last commit marker: ns/b's record is left without one.
	lines := bytes.SplitAfter(data, []byte("\n"))
	data = bytes.Join(lines[:len(lines)-2], nil)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "claims.json")
	rep, err := Salvage(src, dst, Options{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Kept != 1 || len(rep.Lost) != 1 || rep.Lost[0].Key != "ns/b" || rep.Lost[0].ID != "sb-ns/b" {
		t.Fatalf("report %+v: want ns/a kept and ns/b reported", rep)
	}
}

// A source that cannot be read is an error, and no new file is made.
func TestSalvageMissingSource(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "out.json")
	if _, err := Salvage(filepath.Join(dir, "nope.json"), dst, Options{UnsafeNoFsync: true}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing source: %v", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a new file was made from a missing source: %v", err)
	}
}
