package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tornFile writes a log of three acknowledged groups followed by the first
// half of a fourth group's bytes (a torn tail), and returns the whole
// image, the length of its header and the offset where the tail starts.
func tornFile(t *testing.T, path string) (img []byte, header, tail int) {
	t.Helper()
	full, _ := writeGroups(t, path, [][]Op{
		{{Key: "ns/a", Claim: testClaim(1)}},
		{{Key: "ns/b", Claim: testClaim(2)}},
		{{Key: "ns/c", Claim: testClaim(3)}, {Key: "ns/d", Claim: testClaim(4)}, {Key: "ns/e", Claim: testClaim(5)}},
	})
	ends := groupEnds(t, full)
	tail = ends[2] // the end of the second group: the third is cut in half
	img = full[:tail+(len(full)-tail)/2]
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	return img, ends[0], tail
}

// The startup repair keeps what it cuts: a cut file beside the state file,
// 0600, holding the file's header and the cut bytes exactly, durable before
// the truncate (a failure, standing for a crash, right before the truncate
// leaves both the whole state file and the cut file), never overwritten by
// a later repair, and named in a warning with its size.
func TestTheRepairKeepsWhatItCutsInACutFileBeforeTruncating(t *testing.T) {
	path := statePath(t)
	img, header, tail := tornFile(t, path)
	want := append(append([]byte{}, img[:header]...), img[tail:]...)

	crash := errors.New("power cut")
	_, err := Open(path, Options{Logger: quiet(), UnsafeNoFsync: true, failpoint: func(p string) error {
		if p == "repairTruncate" {
			return crash
		}
		return nil
	}})
	if !errors.Is(err, crash) {
		t.Fatalf("Open with a crash before the truncate: %v", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, img) {
		t.Fatal("the state file changed before its cut was kept")
	}
	cuts := CutFiles(path)
	if len(cuts) != 1 || cuts[0].Size != int64(len(want)) {
		t.Fatalf("cut files after the crash: %+v, want one of %d bytes", cuts, len(want))
	}
	first := cuts[0]
	if got, _ := os.ReadFile(first.Path); !bytes.Equal(got, want) {
		t.Fatalf("the cut file holds %q, want the header and the cut bytes", got)
	}
	if fi, _ := os.Stat(first.Path); fi.Mode().Perm() != 0o600 {
		t.Errorf("cut file mode %v, want 0600", fi.Mode().Perm())
	}

	lg, logs := capture()
	s := mustOpen(t, path, Options{Logger: lg, UnsafeNoFsync: true})
	mustClose(t, s)
	if fi, _ := os.Stat(path); fi.Size() != int64(tail) {
		t.Fatalf("state file is %d bytes after the repair, want %d", fi.Size(), tail)
	}
	cuts = CutFiles(path)
	if len(cuts) != 2 || cuts[0] != first {
		t.Fatalf("cut files after the second repair: %+v; want the first kept and a second after it", cuts)
	}
	if got, _ := os.ReadFile(first.Path); !bytes.Equal(got, want) {
		t.Fatal("a later repair changed an earlier cut file")
	}
	log := logs.String()
	for _, w := range []string{"level=WARN", "cut_file=" + cuts[1].Path, "dropped_bytes=" + itoa(len(img)-tail)} {
		if !strings.Contains(log, w) {
			t.Errorf("the repair's log lacks %q:\n%s", w, log)
		}
	}
	if strings.Contains(log, secretPrefix) {
		t.Error("the repair logged a token")
	}

	// Salvage reads a cut file with its state file's salt, without a lock:
	// the half group in it was never acknowledged, so nothing is kept and
	// its whole records are reported.
	rep, err := Salvage(cuts[1].Path, filepath.Join(t.TempDir(), "out.json"), Options{Logger: quiet(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("salvage of a cut file: %v", err)
	}
	if rep.Version != formatVersion || rep.Kept != 0 || len(rep.Lost) == 0 || rep.Lost[0].Key != "ns/c" {
		t.Errorf("salvage of a cut file: %+v; want version 2, nothing kept, ns/c reported", rep)
	}
}

// A cut file's name belongs to its state file only: the lock, compaction
// temp files, a key file and other state files' cut files are none, and a
// lock file made beside a cut file is not one either.
func TestCutFileNamesCannotBeConfusedWithOtherFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "claims.json")
	cut := "claims.json.cut-20261207T032448.123456789Z-4242"
	for _, n := range []string{cut, "claims.json", "claims.json.lock", "claims.json.tmp-123", "node.key",
		"other.json.cut-20261207T032448.123456789Z-1", cut + ".lock", "claims.json.cut-yesterday-1",
		"claims.json.cut-20261207T032448.123456789Z-", "claims.json.cut-20261207T032448.123456789Z-12x"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := CutFiles(path); len(got) != 1 || got[0].Path != filepath.Join(dir, cut) {
		t.Fatalf("CutFiles: %+v, want only %s", got, cut)
	}
	if !isCutFile(filepath.Join(dir, cut)) || isCutFile(path) || isCutFile(filepath.Join(dir, cut+".lock")) {
		t.Error("isCutFile misreads a name")
	}
}

// Inspect names the damaged tail and the cut files, and leaves the file
// as it is.
func TestInspectReportsTheDamagedTailAndTheCutFiles(t *testing.T) {
	path := statePath(t)
	img, _, tail := tornFile(t, path)
	r, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Torn == nil || r.Torn.Offset != int64(tail) || r.Torn.Size != int64(len(img)) || len(r.Cuts) != 0 {
		t.Fatalf("Inspect: %+v; want the tail at %d of %d and no cut files", r, tail, len(img))
	}
	mustClose(t, mustOpen(t, path, Options{UnsafeNoFsync: true}))
	if r, err = Inspect(path); err != nil || r.Torn != nil || len(r.Cuts) != 1 || len(r.Rows) != 2 {
		t.Fatalf("Inspect after the repair: %+v, %v; want 2 rows, no tail, one cut file", r, err)
	}
}
