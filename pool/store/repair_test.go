package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// writeLog commits n puts (one group each) and returns the file's bytes and
// the table.
func writeLog(t *testing.T, path string, n int) ([]byte, map[string]Claim) {
	t.Helper()
	groups := make([][]Op, n)
	for i := range groups {
		groups[i] = []Op{{Key: fmt.Sprintf("ns/p%d", i), Claim: testClaim(i)}}
	}
	data, wants := writeGroups(t, path, groups)
	return data, wants[n]
}

// writeGroups commits each of groups as one Apply, so as one group, and
// returns the file's bytes and the table after each group (wants[0] is
// the empty table).
func writeGroups(t testing.TB, path string, groups [][]Op) ([]byte, []map[string]Claim) {
	t.Helper()
	s := mustOpen(t, path, Options{UnsafeNoFsync: true})
	want := map[string]Claim{}
	wants := []map[string]Claim{clone(want)}
	for _, ops := range groups {
		if err := s.Apply(context.Background(), ops...); err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			if op.Delete {
				delete(want, op.Key)
			} else {
				want[op.Key] = op.Claim
			}
		}
		wants = append(wants, clone(want))
	}
	mustClose(t, s)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, wants
}

func clone(m map[string]Claim) map[string]Claim {
	c := make(map[string]Claim, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func TestTornLastGroupAtEveryByteIsTruncated(t *testing.T) {
	path := statePath(t)
	data, wants := writeGroups(t, path, [][]Op{
		{{Key: "ns/a", Claim: testClaim(1)}, {Key: "ns/b", Claim: testClaim(2)}},
		{{Key: "ns/c", Claim: testClaim(3)}},
		{{Key: "ns/d", Claim: testClaim(4)}, {Key: "ns/a", Delete: true}, {Key: "ns/c", Claim: testClaim(5)}},
	})
	ends := groupEnds(t, data)
	last := ends[2]
	for cut := last; cut <= len(data); cut++ {
		if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		lg, logs := capture()
		s, err := Open(path, Options{Logger: lg, UnsafeNoFsync: true})
		if err != nil {
			t.Fatalf("cut at %d of %d: Open: %v", cut, len(data), err)
		}
		want, size := wants[2], last
		if cut == len(data) {
			want, size = wants[3], len(data)
		}
		checkTable(t, s, want)
		mustClose(t, s)
		if fi, _ := os.Stat(path); fi.Size() != int64(size) {
			t.Fatalf("cut at %d: file is %d bytes after recovery, want %d", cut, fi.Size(), size)
		}
		if cut > last && cut < len(data) && !strings.Contains(logs.String(), "torn tail") {
			t.Fatalf("cut at %d: recovery not logged", cut)
		}
		noToken(t, "recovery log", logs.String())
	}
}

func TestGarbageAfterTheLastGroupIsTruncated(t *testing.T) {
	path := statePath(t)
	data, want := writeLog(t, path, 3)
	salt := saltOf(t, data)
	put := `{"op":"put","key":"ns/x","claim":{"id":"i","token":"t","address":"a","podUID":"u","claimedAt":"2025-01-01T00:00:00Z","deadline":"2025-01-01T01:00:00Z"}}`
	zeroed := sealed(salt, put, `{"op":"del","key":"ns/p0"}`)
	copy(zeroed[40:], make([]byte, 64))
	l := lines(t, data)
	for name, junk := range map[string]string{
		"zeros":                     "\x00\x00\x00\x00\x00\x00\x00\x00",
		"binary":                    "\xde\xad\xbe\xef\x01",
		"text line":                 "hello\n",
		"several bad lines":         "x\n{\"crc\":\"zz\"}\n\n\n",
		"newline only":              "\n",
		"half a frame":              `{"crc":"12`,
		"records without a marker":  string(frame([]byte(`{"op":"del","key":"ns/p0"}`))) + string(frame([]byte(put))),
		"unusable, without marker":  string(frame([]byte(`{"op":"frobnicate","key":"ns/x"}`))),
		"a group of another file":   string(sealed(salt+1, `{"op":"del","key":"ns/p0"}`)),
		"a marker that mismatches":  string(frame([]byte(`{"op":"commit","n":1,"len":40,"sum":"00000000"}`))),
		"zeroed bytes, then marker": string(zeroed),
		"marker, then zeroed group": string(zeroed[bytes.LastIndexByte(zeroed[:len(zeroed)-1], '\n')+1:]) + string(zeroed[:300]),
		"torn copy of a group":      string(data[l[3].off : l[4].end-5]),
		"a group, torn before its sectors 2-3": string(append(append(
			[]byte(nil), sealed(salt, put, put, put)[:100]...), make([]byte, 700)...)),
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
		if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
			t.Fatalf("%s: file not truncated back to the last committed group", name)
		}
	}
}

func TestDamageFollowedByACommittedGroupIsFatal(t *testing.T) {
	path := statePath(t)
	data, _ := writeLog(t, path, 4)
	l := lines(t, data) // h, r1, m1, r2, m2, r3, m3, r4, m4
	r2, m2 := l[3], l[4]
	flip := func(off int) func([]byte) []byte {
		return func(b []byte) []byte { b[off] ^= 0x01; return b }
	}
	cut := func(from, to int) func([]byte) []byte {
		return func(b []byte) []byte { return append(b[:from:from], b[to:]...) }
	}
	other := encodeLine("ns/p1", &Claim{ID: strings.Repeat("x", 12)}, false)
	for name, c := range map[string]struct {
		damage func([]byte) []byte
		at     span // the line the error must name
	}{
		"body byte of a record": {flip(r2.off + bodyOffset + 10), r2},
		"crc digit of a record": {flip(r2.off + len(framePrefix)), r2},
		"token byte":            {flip(r2.off + bytes.Index(data[r2.off:], []byte(secretPrefix))), r2},
		"zeroed bytes":          {func(b []byte) []byte { copy(b[r2.off+30:], make([]byte, 64)); return b }, r2},
		"marker byte":           {flip(m2.off + bodyOffset + 5), m2},
		"marker newline":        {flip(m2.end - 1), m2},
		"marker removed":        {cut(m2.off, m2.end), r2},
		"record removed":        {cut(r2.off, r2.end), span{off: r2.off}},
		"record replaced":       {func(b []byte) []byte { return append(append(b[:r2.off:r2.off], other...), b[r2.end:]...) }, span{off: r2.off + len(other)}},
	} {
		bad := c.damage(bytes.Clone(data))
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path, Options{Logger: quiet()})
		var ce *corruptError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: Open = %v, want *corruptError", name, err)
		}
		if ce.Path != path || ce.Offset != int64(c.at.off) || !strings.Contains(err.Error(), path) ||
			!strings.Contains(err.Error(), "followed by a committed group") {
			t.Fatalf("%s: %+v (%v), want offset %d", name, ce, err, c.at.off)
		}
		if wantLine := 1 + bytes.Count(bad[:c.at.off], []byte{'\n'}); ce.Line != wantLine {
			t.Fatalf("%s: line %d, want %d", name, ce.Line, wantLine)
		}
		noToken(t, "corruptError", err.Error())
		if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
			t.Fatalf("%s: a corrupt file was modified", name)
		}
	}
}

func TestUnusableRecordInsideACommittedGroupIsFatal(t *testing.T) {
	path := statePath(t)
	data, _ := writeLog(t, path, 2)
	salt := saltOf(t, data)
	ok := `{"op":"del","key":"ns/p0"}`
	for name, body := range map[string]string{
		"unknown op":        `{"op":"frobnicate","key":"ns/x"}`,
		"empty key":         `{"op":"del","key":""}`,
		"put without claim": `{"op":"put","key":"ns/x"}`,
		"not an object":     `[1,2,3]`,
		"bad time":          `{"op":"put","key":"ns/x","claim":{"claimedAt":"yesterday"}}`,
		"second header":     string(encodeHeader(salt)[bodyOffset : len(encodeHeader(salt))-len(frameSuffix)]),
	} {
		bad := append(bytes.Clone(data), sealed(salt, ok, body)...)
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path, Options{Logger: quiet()})
		var ce *corruptError
		if !errors.As(err, &ce) || ce.Line != 7 || !strings.Contains(err.Error(), "inside a committed group") {
			t.Fatalf("%s: Open = %v, want *corruptError at line 7", name, err)
		}
	}
}

func TestEmptyFileIsAnEmptyTableAndGetsAHeader(t *testing.T) {
	path := statePath(t)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, path, Options{})
	if s.Len() != 0 {
		t.Fatal("rows from an empty file")
	}
	mustClose(t, s)
	data, _ := os.ReadFile(path)
	if l := lines(t, data); len(l) != 1 {
		t.Fatalf("empty log holds %d lines, want the header only", len(l))
	}
}

func TestTornHeaderIsAnEmptyTable(t *testing.T) {
	hdr := encodeHeader(newSalt())
	torn := map[string][]byte{"zeros": make([]byte, len(hdr)), "zeros and more": make([]byte, 4096)}
	for cut := 1; cut < len(hdr); cut++ {
		torn[fmt.Sprintf("cut at %d", cut)] = hdr[:cut]
		torn[fmt.Sprintf("zeros from %d", cut)] = append(bytes.Clone(hdr[:cut]), make([]byte, len(hdr)-cut)...)
	}
	for name, data := range torn {
		path := statePath(t)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, Options{Logger: quiet(), UnsafeNoFsync: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Len() != 0 {
			t.Fatalf("%s: rows from a torn header", name)
		}
		mustClose(t, s)
		got, _ := os.ReadFile(path)
		if l := lines(t, got); len(l) != 1 {
			t.Fatalf("%s: %d lines after recovery, want a new header", name, len(l))
		}
	}
}

func TestHeaderOfANewerVersionIsFatal(t *testing.T) {
	path := statePath(t)
	doc := string(frame([]byte(`{"op":"format","version":3,"salt":"0123456789abcdef"}`)))
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{Logger: quiet()})
	var ce *corruptError
	if !errors.As(err, &ce) || ce.Line != 1 || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("Open = %v, want *corruptError naming version 3", err)
	}
	if got, _ := os.ReadFile(path); string(got) != doc {
		t.Fatal("file modified")
	}
}

func TestDamagedHeaderBeforeACommittedGroupIsFatal(t *testing.T) {
	path := statePath(t)
	data, _ := writeLog(t, path, 2)
	data[bodyOffset+3] ^= 0x01
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{Logger: quiet()})
	var ce *corruptError
	if !errors.As(err, &ce) || ce.Line != 1 || ce.Offset != 0 {
		t.Fatalf("Open = %v, want *corruptError at line 1", err)
	}
}
