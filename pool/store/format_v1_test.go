package store

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// Version 1 logs (records only, no header or markers) are what older
// binaries wrote. They load by the version 1 rules and are rewritten into
// the current format at once.

// checkUpgraded checks that path now holds a current log of exactly want.
func checkUpgraded(t *testing.T, path string, want map[string]Claim) {
	t.Helper()
	s := mustOpen(t, path, Options{})
	checkTable(t, s, want)
	mustClose(t, s)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, data); n < len(want) {
		t.Fatalf("upgraded log holds %d records, want at least %d", n, len(want))
	}
}

func TestV1LogLoadsAndIsUpgraded(t *testing.T) {
	path := statePath(t)
	_, want := writeV1Log(t, path, 5)
	lg, logs := capture()
	s := mustOpen(t, path, Options{Logger: lg})
	checkTable(t, s, want)
	if !strings.Contains(logs.String(), "version 1 log") {
		t.Fatalf("upgrade not logged:\n%s", logs)
	}
	if err := s.Put(t.Context(), "ns/new", testClaim(9)); err != nil {
		t.Fatal(err)
	}
	want["ns/new"] = testClaim(9)
	mustClose(t, s)
	checkUpgraded(t, path, want)
}

func TestCrashBeforeTheUpgradeRenameLeavesTheV1Log(t *testing.T) {
	path := statePath(t)
	data, want := writeV1Log(t, path, 3)
	f := newFaults()
	f.set("rename", 1)
	if _, err := Open(path, Options{Logger: quiet(), failpoint: f.failpoint}); err == nil {
		t.Fatal("Open succeeded although the upgrade could not be committed")
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Fatal("version 1 log changed by a failed upgrade")
	}
	checkUpgraded(t, path, want)
}

func TestV1TornTailAtEveryByteOfTheLastRecordIsTruncated(t *testing.T) {
	path := statePath(t)
	data, want := writeV1Log(t, path, 4)
	starts := lineStarts(data)
	last := starts[len(starts)-1]
	delete(want, "ns/p3")
	for cut := last; cut < len(data); cut++ {
		if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		lg, logs := capture()
		s, err := Open(path, Options{Logger: lg, UnsafeNoFsync: true})
		if err != nil {
			t.Fatalf("cut at %d of %d: Open: %v", cut, len(data), err)
		}
		checkTable(t, s, want)
		mustClose(t, s)
		if cut > last && !strings.Contains(logs.String(), "torn tail") {
			t.Fatalf("cut at %d: recovery not logged", cut)
		}
		noToken(t, "recovery log", logs.String())
		checkUpgraded(t, path, want)
	}
}

func TestV1GarbageAfterTheLastRecordIsTruncated(t *testing.T) {
	path := statePath(t)
	data, want := writeV1Log(t, path, 3)
	for name, junk := range map[string]string{
		"zeros":              "\x00\x00\x00\x00\x00\x00\x00\x00",
		"several bad lines":  "x\n{\"crc\":\"zz\"}\n\n\n",
		"frame, bad crc":     `{"crc":"00000000","rec":{"op":"del","key":"ns/p0"}}` + "\n",
		"half a frame":       `{"crc":"12`,
		"torn copy of a rec": string(data[lineStarts(data)[1] : lineStarts(data)[2]-5]),
	} {
		if err := os.WriteFile(path, append(bytes.Clone(data), junk...), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, Options{Logger: quiet(), UnsafeNoFsync: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkTable(t, s, want)
		mustClose(t, s)
		checkUpgraded(t, path, want)
	}
}

func TestV1CorruptionBeforeAWholeRecordIsFatal(t *testing.T) {
	path := statePath(t)
	data, _ := writeV1Log(t, path, 5)
	starts := lineStarts(data)
	for name, c := range map[string]struct {
		off  int // byte to damage
		line int
	}{
		"body byte of line 2":  {starts[1] + bodyOffset + 10, 2},
		"crc digit of line 3":  {starts[2] + len(framePrefix), 3},
		"frame of line 4":      {starts[3] + 1, 4},
		"newline of line 1":    {starts[1] - 1, 1},
		"token byte of line 2": {starts[1] + bytes.Index(data[starts[1]:], []byte(secretPrefix)), 2},
	} {
		bad := bytes.Clone(data)
		bad[c.off] ^= 0x01
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path, Options{Logger: quiet()})
		var ce *corruptError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: Open = %v, want *corruptError", name, err)
		}
		if ce.Path != path || ce.Line != c.line || ce.Offset != int64(starts[c.line-1]) ||
			!strings.Contains(err.Error(), path) {
			t.Fatalf("%s: %+v (%v), want line %d at offset %d", name, ce, err, c.line, starts[c.line-1])
		}
		noToken(t, "corruptError", err.Error())
		if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
			t.Fatalf("%s: a corrupt file was modified", name)
		}
	}
}

func TestV1WholeRecordWithUnusableContentIsFatalEvenAtTheTail(t *testing.T) {
	path := statePath(t)
	data, _ := writeV1Log(t, path, 2)
	for name, body := range map[string]string{
		"unknown op":        `{"op":"frobnicate","key":"ns/x"}`,
		"empty key":         `{"op":"del","key":""}`,
		"put without claim": `{"op":"put","key":"ns/x"}`,
		"not an object":     `[1,2,3]`,
		"bad time":          `{"op":"put","key":"ns/x","claim":{"claimedAt":"yesterday"}}`,
		"a v2 marker":       `{"op":"commit","n":1,"len":300,"sum":"00000000"}`,
	} {
		bad := append(bytes.Clone(data), frame([]byte(body))...)
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path, Options{Logger: quiet()})
		var ce *corruptError
		if !errors.As(err, &ce) || ce.Line != 3 {
			t.Fatalf("%s: Open = %v, want *corruptError at line 3", name, err)
		}
	}
}

// lineStarts returns the byte offset of each line.
func lineStarts(data []byte) []int {
	starts := []int{0}
	for i, b := range data[:len(data)-1] {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}
