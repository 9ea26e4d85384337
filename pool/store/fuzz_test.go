package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzLoad pins the load contract on arbitrary files: Open never panics; it
// either fails or loads a table that survives Close and a second Open
// unchanged (so recovery and migration write back exactly what they read).
// Seeds live in testdata/fuzz/FuzzLoad: empty, a valid log, a torn tail,
// a JSON claims document, garbage, mid-file corruption.
func FuzzLoad(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "claims.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		o := Options{UnsafeNoFsync: true, Logger: quiet()}
		s, err := Open(path, o)
		if err != nil {
			return
		}
		first := snapshot(s)
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		s, err = Open(path, o)
		if err != nil {
			t.Fatalf("reopening a file this store loaded and wrote back: %v", err)
		}
		defer s.Close()
		second := snapshot(s)
		if len(first) != len(second) {
			t.Fatalf("%d rows, then %d after reopen", len(first), len(second))
		}
		for k, a := range first {
			b, ok := second[k]
			if !ok || !identical(a, b) {
				t.Fatalf("row %q: %+v, then %+v (present %v) after reopen", k, a, b, ok)
			}
		}
	})
}

// identical is sameClaim plus the zone offsets, which JSON round-trips too.
func identical(a, b Claim) bool {
	return sameClaim(a, b) &&
		a.ClaimedAt.Format(time.RFC3339Nano) == b.ClaimedAt.Format(time.RFC3339Nano) &&
		a.Deadline.Format(time.RFC3339Nano) == b.Deadline.Format(time.RFC3339Nano)
}
