package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// referenceRows is testdata/reference-claims.json, a JSON claims document,
// written out by hand.
func referenceRows(t *testing.T) map[string]Claim {
	t.Helper()
	ts := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return map[string]Claim{
		"default/sandbox-a": {
			ID: "sb-7f3a9c", Token: "SECRET-TOKEN-a-3f1e0c9b8a7d6e5f4a3b2c1d0e9f8a7b",
			Address: "10.88.0.12", PodUID: "6b1f2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
			ClaimedAt: ts("2025-03-14T09:26:53.589793238Z"), Deadline: ts("2025-03-14T10:26:53.589793238Z"),
			Owner: OwnerUnknown,
		},
		"team-x/agent-1": {
			ID: "sb-000001", Token: "SECRET-TOKEN-b-0000000000000000000000000000000b",
			Address: "10.88.0.13", PodUID: "00000000-0000-4000-8000-000000000001",
			ClaimedAt: ts("2025-03-14T11:00:00+02:00"), Deadline: ts("2025-03-15T11:00:00+02:00"),
			Owner: OwnerUnknown,
		},
		"team-x/agent-2": {
			ID: "sb-000002", Token: `SECRET-TOKEN-c-<escaped>/"quoted"`,
			Address: "[fd00::2]:8080", PodUID: "00000000-0000-4000-8000-000000000002",
			ClaimedAt: time.Time{}, Deadline: ts("2025-03-14T12:00:00Z"),
			Owner: OwnerUnknown,
		},
	}
}

func copyFixture(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/reference-claims.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestReferenceFormatLoadsUnchangedAndIsMigratedToTheLog(t *testing.T) {
	path := statePath(t)
	copyFixture(t, path)
	want := referenceRows(t)
	s := mustOpen(t, path, Options{})
	checkTable(t, s, want)
	// Zones survive too, not only the instants.
	if c, _ := s.Get("team-x/agent-1"); c.ClaimedAt.Format(time.RFC3339) != "2025-03-14T11:00:00+02:00" {
		t.Fatalf("offset lost: %v", c.ClaimedAt)
	}
	data, _ := os.ReadFile(path)
	if countRecords(t, data) != len(want) || saltOf(t, data) == 0 {
		t.Fatalf("file was not rewritten as a %d-record log:\n%s", len(want), data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("migrated file mode %v", fi.Mode().Perm())
	}
	if err := s.Put(context.Background(), "ns/new", testClaim(1)); err != nil {
		t.Fatal(err)
	}
	want["ns/new"] = testClaim(1)
	mustClose(t, s)

	s = mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, want)
}

// The JSON claims document records no owner, and that is not a bare Pod's
// row: each migrated row records an unknown owner, which survives a reopen.
func TestMigratedRowsRecordAnUnknownOwner(t *testing.T) {
	path := statePath(t)
	copyFixture(t, path)
	mustClose(t, mustOpen(t, path, Options{}))
	s := mustOpen(t, path, Options{})
	defer mustClose(t, s)
	n := 0
	s.Range(func(key string, c Claim) bool {
		n++
		if c.OwnerKnown() || c.OwnerUID != "" {
			t.Errorf("%s: owner %q/%q after migration, want unknown", key, c.Owner, c.OwnerUID)
		}
		return true
	})
	if n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
}

func TestCompactReferenceDocumentLoads(t *testing.T) {
	path := statePath(t)
	doc := `{"claims":{"ns/a":{"id":"i","token":"t","address":"a","podUID":"u","claimedAt":"2025-01-01T00:00:00Z","deadline":"2025-01-01T01:00:00Z"}}}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, path, Options{})
	defer mustClose(t, s)
	if c, ok := s.Get("ns/a"); !ok || c.ID != "i" || c.Token != "t" || c.OwnerUID != "" {
		t.Fatalf("got %+v %v", c, ok)
	}
}

func TestEmptyReferenceDocumentIsAnEmptyTable(t *testing.T) {
	for _, doc := range []string{`{"claims":{}}`, `{"claims":null}`, " \n{\"claims\" : {}}\n"} {
		path := statePath(t)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		s := mustOpen(t, path, Options{})
		if s.Len() != 0 {
			t.Fatalf("%q: %d rows", doc, s.Len())
		}
		mustClose(t, s)
	}
}

func TestDamagedReferenceDocumentIsFatalAndUntouched(t *testing.T) {
	fixture, _ := os.ReadFile("testdata/reference-claims.json")
	for name, c := range map[string]struct {
		doc  string
		line int
	}{
		"trailing data":      {string(fixture) + "{}", 29},
		"truncated":          {string(fixture[:200]), 7},
		"no claims member":   {`{"sandboxes":{}}`, 1},
		"wrong claims type":  {`{"claims":[1]}`, 1},
		"not JSON":           {"claims=1\n", 1},
		"JSON null":          {"null", 1},
		"empty key":          {`{"claims":{"":{"id":"x"}}}`, 1},
		"bad time in a row":  {`{"claims":{"ns/a":{"token":"SECRET-TOKEN-x","claimedAt":"noon"}}}`, 1},
		"whitespace only":    {"  \n\t", 1},
		"wrong token type":   {`{"claims":{"ns/a":{"token":7}}}`, 1},
		"log after document": {`{"claims":{}}` + "\n" + string(frame([]byte(`{"op":"del","key":"k"}`))), 1},
	} {
		path := statePath(t)
		if err := os.WriteFile(path, []byte(c.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path, Options{Logger: quiet()})
		var ce *corruptError
		if !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: Open = %v, want *corruptError naming %s", name, err, path)
		}
		if name == "trailing data" || name == "truncated" {
			if ce.Line != c.line {
				t.Errorf("%s: line %d, want %d (%v)", name, ce.Line, c.line, err)
			}
		}
		noToken(t, "corruptError", err.Error())
		if got, _ := os.ReadFile(path); string(got) != c.doc {
			t.Fatalf("%s: a corrupt file was modified", name)
		}
	}
}

func TestCrashBeforeMigrationRenameLeavesTheReferenceFile(t *testing.T) {
	path := statePath(t)
	data := copyFixture(t, path)
	f := newFaults()
	f.set("rename", 1)
	if _, err := Open(path, Options{Logger: quiet(), failpoint: f.failpoint}); err == nil {
		t.Fatal("Open succeeded although the migration could not be committed")
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Fatal("JSON claims document changed by a failed migration")
	}
	s := mustOpen(t, path, Options{})
	defer mustClose(t, s)
	checkTable(t, s, referenceRows(t))
}
