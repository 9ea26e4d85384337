package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// referenceLine is the line encoding/json would produce: the contract the
// hand-written encoder must meet byte for byte.
func referenceLine(t testing.TB, key string, c Claim, del bool) []byte {
	rec := record{Op: opPut, Key: key, Claim: &c}
	if del {
		rec = record{Op: opDel, Key: key}
	}
	body, err := json.Marshal(&rec)
	if err != nil {
		t.Fatal(err)
	}
	return frame(body)
}

func TestEncoderMatchesEncodingJSON(t *testing.T) {
	odd := []string{
		"", "plain", `quote"back\slash`, "<script>&amp;</script>", "ctl\x00\x01\x1f\x7f",
		"\b\f\n\r\t", "ünïcødé ✓ 🚀", "\u2028\u2029", "\xff\xfeinvalid", "a\xe2\x80", "/",
	}
	zones := []*time.Location{time.UTC, time.FixedZone("", -9*3600-30*60), time.FixedZone("X", 14*3600)}
	for i, s := range odd {
		c := testClaim(i)
		c.ID, c.Token, c.Address, c.PodUID = s, s+"t", "a"+s, s
		c.OwnerUID = odd[(i+3)%len(odd)]
		c.Owner = odd[(i+5)%len(odd)]
		c.ClaimedAt = c.ClaimedAt.In(zones[i%len(zones)]).Add(time.Duration(i) * 1234567)
		if i%4 == 0 {
			c.Deadline = time.Time{}
		}
		for _, del := range []bool{false, true} {
			got := encodeLine("ns/"+s, &c, del)
			if want := referenceLine(t, "ns/"+s, c, del); !bytes.Equal(got, want) {
				t.Fatalf("case %d (del %v):\n got %s\nwant %s", i, del, got, want)
			}
		}
	}
}

func FuzzEncoderMatchesJSON(f *testing.F) {
	f.Add("ns/a", "id", "tok<&>", "10.0.0.1", "uid", "", int64(1735787045), int64(123), 0)
	f.Add("\xff", "\u2028", "\x00", "\"", "\\", "own", int64(-62135596800), int64(0), -3600)
	f.Fuzz(func(t *testing.T, key, id, token, addr, uid, owner string, sec, nsec int64, offset int) {
		at := time.Unix(sec, nsec%1e9).In(time.FixedZone("", offset%(24*3600)))
		if at.Year() < 0 || at.Year() > 9999 {
			return // rejected by checkClaim before encoding
		}
		c := Claim{ID: id, Token: token, Address: addr, PodUID: uid, OwnerUID: owner, ClaimedAt: at, Deadline: at.UTC()}
		if got, want := encodeLine(key, &c, false), referenceLine(t, key, c, false); !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
		if got, want := encodeLine(key, &c, true), referenceLine(t, key, c, true); !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

func TestEveryLineIsAJSONDocumentWhoseCRCCoversTheBody(t *testing.T) {
	line := encodeLine("ns/a", &Claim{ID: "x", Token: "y"}, false)
	var doc struct {
		CRC string          `json:"crc"`
		Rec json.RawMessage `json:"rec"`
	}
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatalf("line is not JSON: %v\n%s", err, line)
	}
	if got, _ := parseHex32([]byte(doc.CRC)); got != crc32Sum(doc.Rec) {
		t.Fatalf("crc %s does not cover the body", doc.CRC)
	}
}

// FuzzFastDecodeMatchesJSON: whenever the fast decoder accepts a body,
// encoding/json accepts it too and decodes the same record.
func FuzzFastDecodeMatchesJSON(f *testing.F) {
	owned := testClaim(7)
	owned.OwnerUID = "owner-ü"
	owned.Owner = "agents.x-k8s.io/v1beta1/Sandbox/bö"
	owned.ClaimedAt = owned.ClaimedAt.In(time.FixedZone("", -5*3600))
	for _, line := range [][]byte{
		encodeLine("ns/a", &Claim{}, false),
		encodeLine("ns/b", &owned, false),
		encodeLine("ns/c", &owned, true),
		encodeLine(`ns/"esc"<&>`, &owned, false),
		appendMarker(nil, 3, []byte("records"), 0x0123456789abcdef),
	} {
		f.Add(line[bodyOffset : len(line)-len(frameSuffix)])
	}
	f.Add([]byte(`{"op":"put","key":"k","claim":{"id":"","token":"","address":"","podUID":"","claimedAt":"0001-01-01T00:00:00Z","deadline":"2025-02-30T00:00:00Z"}}`))
	f.Add([]byte(`{"op":"commit","n":0,"len":012,"sum":"zz"}`))
	f.Add([]byte(`{"op":"commit","n":12345678901234567890,"len":1e3,"sum":"00000000"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast record
		if !fastDecode(body, &fast) {
			return
		}
		var slow record
		if err := json.Unmarshal(body, &slow); err != nil {
			t.Fatalf("fast path accepted what encoding/json rejects (%v): %q", err, body)
		}
		if fast.Op != slow.Op || fast.Key != slow.Key || (fast.Claim == nil) != (slow.Claim == nil) ||
			(fast.Claim != nil && !identical(*fast.Claim, *slow.Claim)) ||
			fast.N != slow.N || fast.Len != slow.Len || fast.Sum != slow.Sum ||
			fast.Version != slow.Version || fast.Salt != slow.Salt {
			t.Fatalf("fast %+v %+v != json %+v %+v for %q", fast, fast.Claim, slow, slow.Claim, body)
		}
	})
}

func TestFastDecoderTakesEveryLineTheEncoderWrites(t *testing.T) {
	c := testClaim(3)
	c.OwnerUID = "o"
	for _, del := range []bool{false, true} {
		line := encodeLine("ns/a", &c, del)
		var rec record
		if !fastDecode(line[bodyOffset:len(line)-len(frameSuffix)], &rec) {
			t.Fatalf("fast path declined its own encoding (del %v): %s", del, line)
		}
	}
}
