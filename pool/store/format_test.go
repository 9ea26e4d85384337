package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// span is one line of a log: [off, end) and what it is.
type span struct {
	off, end int
	kind     byte // 'h' header, 'r' record, 'm' commit marker
}

// lines splits a well-formed version 2 log into its lines.
func lines(t testing.TB, data []byte) []span {
	t.Helper()
	var out []span
	for off := 0; off < len(data); {
		end := off + bytes.IndexByte(data[off:], '\n') + 1
		if end <= off {
			t.Fatalf("unterminated line at %d", off)
		}
		kind := byte('r')
		switch body := string(data[off+bodyOffset : end-len(frameSuffix)]); {
		case bytes.HasPrefix([]byte(body), []byte(`{"op":"format"`)):
			kind = 'h'
		case bytes.HasPrefix([]byte(body), []byte(`{"op":"commit"`)):
			kind = 'm'
		}
		out = append(out, span{off, end, kind})
		off = end
	}
	if len(out) == 0 || out[0].kind != 'h' {
		t.Fatalf("log does not start with a header")
	}
	return out
}

// groupEnds returns the end of the header and of every committed group.
func groupEnds(t testing.TB, data []byte) []int {
	t.Helper()
	var ends []int
	for _, l := range lines(t, data) {
		if l.kind != 'r' {
			ends = append(ends, l.end)
		}
	}
	return ends
}

// countRecords counts the put and del lines of a version 2 log.
func countRecords(t testing.TB, data []byte) int {
	n := 0
	for _, l := range lines(t, data) {
		if l.kind == 'r' {
			n++
		}
	}
	return n
}

// sealed builds one group of a log with salt from bodies, framing each:
// what the writer appends for a batch.
func sealed(salt uint64, bodies ...string) []byte {
	var recs []byte
	for _, b := range bodies {
		recs = append(recs, frame([]byte(b))...)
	}
	return appendMarker(recs, len(bodies), bytes.Clone(recs), salt)
}

// saltOf reads the salt from a version 2 log's header.
func saltOf(t testing.TB, data []byte) uint64 {
	t.Helper()
	var h headerBody
	l := lines(t, data)[0]
	if err := json.Unmarshal(data[l.off+bodyOffset:l.end-len(frameSuffix)], &h); err != nil {
		t.Fatal(err)
	}
	v, ok := parseHex(h.Salt, saltDigits)
	if !ok {
		t.Fatalf("bad salt %q", h.Salt)
	}
	return v
}

// writeV1Log writes the version 1 log of n puts (what an older binary
// wrote: records only) and returns its bytes and table.
func writeV1Log(t testing.TB, path string, n int) ([]byte, map[string]Claim) {
	t.Helper()
	var data []byte
	want := map[string]Claim{}
	for i := range n {
		k := fmt.Sprintf("ns/p%d", i)
		c := testClaim(i)
		data = append(data, encodeLine(k, &c, false)...)
		want[k] = c
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return data, want
}

func TestHeaderAndMarkerAreWhatEncodingJSONWrites(t *testing.T) {
	const salt = 0x0123456789abcdef
	hb, _ := json.Marshal(headerBody{Op: opFormat, Version: formatVersion, Salt: "0123456789abcdef"})
	if got, want := encodeHeader(salt), frame(hb); !bytes.Equal(got, want) {
		t.Fatalf("header\n got %s\nwant %s", got, want)
	}
	recs := frame([]byte(`{"op":"del","key":"ns/a"}`))
	mb, _ := json.Marshal(markerBody{Op: opCommit, N: 1, Len: len(recs), Sum: fmt.Sprintf("%08x", groupSum(salt, recs))})
	if got, want := appendMarker(nil, 1, recs, salt), frame(mb); !bytes.Equal(got, want) {
		t.Fatalf("marker\n got %s\nwant %s", got, want)
	}
	var rec record
	if !fastDecode(mb, &rec) || rec.Op != opCommit || rec.N != 1 || rec.Len != len(recs) {
		t.Fatalf("fast path declined or misread a marker: %+v", rec)
	}
	// The sum depends on the salt: a group of another file never matches.
	if groupSum(salt, recs) == groupSum(salt+1, recs) {
		t.Fatal("group sum ignores the salt")
	}
}
