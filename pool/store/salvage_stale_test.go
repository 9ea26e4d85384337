package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// salvageInto runs Salvage of src into a new file and returns its report
// and the salvaged table.
func salvageInto(t *testing.T, src string) (SalvageReport, map[string]Claim) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "salvaged.json")
	rep, err := Salvage(src, dst, Options{Logger: quiet(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("Salvage: %v", err)
	}
	s := mustOpen(t, dst, Options{UnsafeNoFsync: true})
	defer mustClose(t, s)
	got := map[string]Claim{}
	s.Range(func(k string, c Claim) bool { got[k] = c; return true })
	return rep, got
}

// salvage-replays-stale-log: a power cut can leave, in the torn tail, a
// whole group of an older log of the same node (its freed blocks), with a
// whole commit marker sealed under that log's salt. Salvage must not
// replay it: its del would drop the acknowledged claim ns/a. The group is
// reported, its del by key, and the claim is kept with its token.
func TestSalvageNeverReplaysAStaleGroupOfAnOlderLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "claims.json")
	data, wants := writeGroups(t, path, [][]Op{
		{{Key: "ns/a", Claim: testClaim(1)}},
		{{Key: "ns/b", Claim: testClaim(2)}},
	})
	older, _ := writeGroups(t, filepath.Join(dir, "older.json"), [][]Op{
		{{Key: "ns/a", Claim: testClaim(1)}},
		{{Key: "ns/a", Delete: true}},
	})
	oe := groupEnds(t, older)
	stale := older[oe[1]:oe[2]] // del ns/a and its marker, both whole
	for name, tail := range map[string][]byte{
		"stale group right after the last group": stale,
		"stale group after a torn record":        append([]byte(`{"crc":"0000`+"\x00\x00\x00\n"), stale...),
	} {
		t.Run(name, func(t *testing.T) {
			img := append(append([]byte{}, data...), tail...)
			if err := os.WriteFile(path, img, 0o600); err != nil {
				t.Fatal(err)
			}
			rep, got := salvageInto(t, path)
			if len(got) != 2 || got["ns/a"] != wants[2]["ns/a"] || got["ns/b"] != wants[2]["ns/b"] {
				t.Fatalf("salvaged %v; want ns/a and ns/b with their tokens", got)
			}
			var del *SalvageLoss
			for i, l := range rep.Lost {
				if l.Op == opDel && l.Key == "ns/a" {
					del = &rep.Lost[i]
				}
			}
			if del == nil || del.Offset != int64(len(img)-len(stale)) || !strings.Contains(del.Reason, "does not verify") {
				t.Fatalf("report %+v: want the stale del of ns/a reported at byte offset %d", rep, len(img)-len(stale))
			}
			// Open agrees: the stale group is part of the torn tail.
			s := mustOpen(t, path, Options{UnsafeNoFsync: true})
			checkTable(t, s, wants[2])
			mustClose(t, s)
		})
	}
}

// A group whose marker verifies is kept wherever it lies, even after
// damage; the whole records of a group whose marker does not verify (here
// one of its records is damaged) are reported, not kept: nothing proves
// that they belong to this file.
func TestSalvageKeepsOnlyGroupsWhoseMarkerVerifies(t *testing.T) {
	path := statePath(t)
	data, _ := writeGroups(t, path, [][]Op{
		{{Key: "ns/a", Claim: testClaim(1)}},
		{{Key: "ns/b", Claim: testClaim(2)}, {Key: "ns/c", Claim: testClaim(3)}},
		{{Key: "ns/d", Claim: testClaim(4)}},
	})
	i := bytes.Index(data, []byte(testClaim(3).Token))
	data[i] ^= 0x20 // ns/c's checksum fails, and with it its group's marker
	ends := groupEnds(t, data)
	data = append(data[:ends[2]:ends[2]], append([]byte("garbage between groups\n"), data[ends[2]:]...)...)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, got := salvageInto(t, path)
	if _, ok := got["ns/a"]; !ok || len(got) != 2 || got["ns/d"] != testClaim(4) {
		t.Fatalf("salvaged %v; want ns/a and ns/d", got)
	}
	var reported []string
	for _, l := range rep.Lost {
		reported = append(reported, l.Op+" "+l.Key)
		if l.Key == "ns/b" && !strings.Contains(l.Reason, "does not verify") {
			t.Errorf("ns/b reported for %q", l.Reason)
		}
	}
	if strings.Join(reported, "|") != "put ns/b| | " {
		t.Errorf("reported %q: want ns/b (whole, in a group that does not verify), ns/c's damaged line, the garbage line", reported)
	}
}

// salvage-live-file: salvage refuses a file whose lock is held (a live
// vk-sandbox would go on acknowledging claims the new file lacks): the
// error names the holder and says to stop the service, no new file is
// made, and the source is unchanged. Once the lock is free it runs.
func TestSalvageRefusesAFileWhoseLockIsHeld(t *testing.T) {
	src, _, _ := salvageSource(t, "ns/a", "ns/b")
	before, _ := os.ReadFile(src)
	s := mustOpen(t, src, Options{UnsafeNoFsync: true})
	dst := filepath.Join(t.TempDir(), "salvaged.json")
	_, err := Salvage(src, dst, Options{UnsafeNoFsync: true})
	var le *LockedError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "stop the service") || !strings.Contains(err.Error(), src) {
		t.Fatalf("salvage of a locked file: %v; want a *LockedError naming the file and saying to stop the service", err)
	}
	if _, serr := os.Stat("/proc/locks"); serr == nil && !strings.Contains(le.Holder, "pid ") {
		t.Errorf("holder %q: want the pid from /proc/locks", le.Holder)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused salvage made %s: %v", dst, err)
	}
	if after, _ := os.ReadFile(src); !bytes.Equal(after, before) {
		t.Error("a refused salvage changed the source")
	}
	mustClose(t, s)
	if rep, err := Salvage(src, dst, Options{UnsafeNoFsync: true}); err != nil || rep.Kept != 2 {
		t.Fatalf("salvage once the lock is free: %+v, %v", rep, err)
	}
	// Salvage holds the lock for its run and gives it back: the store opens.
	mustClose(t, mustOpen(t, src, Options{UnsafeNoFsync: true}))
}
