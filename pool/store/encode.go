package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"time"
	"unicode/utf8"
)

// A record is one line:
//
//	{"crc":"<8 lowercase hex digits>","rec":<body>}\n
//
// where body is the JSON of a record and crc is the CRC-32C (Castagnoli) of
// the body bytes exactly as written. The frame is fixed-width, so the body
// starts at byte bodyOffset and the decoder checks the frame and the CRC
// before it parses any JSON. Every line is itself a JSON document (jq works).
const (
	framePrefix = `{"crc":"`
	frameMid    = `","rec":`
	frameSuffix = "}\n"
	crcDigits   = 8
	bodyOffset  = len(framePrefix) + crcDigits + len(frameMid)
	frameBytes  = bodyOffset + len(frameSuffix)
)

const (
	opPut = "put"
	opDel = "del"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is the body of a line: a put carries the whole claim (so any put
// record alone restores its row), a delete carries only the key. The
// remaining fields belong to the format header and the commit marker of
// version 2 (group.go); they are zero, and omitted, in a put or a del.
type record struct {
	Op      string `json:"op"`
	Key     string `json:"key"`
	Claim   *Claim `json:"claim,omitempty"`
	Version int    `json:"version,omitempty"`
	Salt    string `json:"salt,omitempty"`
	N       int    `json:"n,omitempty"`
	Len     int    `json:"len,omitempty"`
	Sum     string `json:"sum,omitempty"`
}

// Op is one mutation for Apply: a put of Claim under Key, or, with Delete
// set, a tombstone for Key (Claim is then ignored).
type Op struct {
	Key    string
	Claim  Claim
	Delete bool
}

// encodedOp is an Op validated and framed by the caller's goroutine, so the
// writer only concatenates bytes.
type encodedOp struct {
	key   string
	claim Claim
	del   bool
	line  []byte
}

// encodeOp validates op and frames its record. Errors name the key, never a
// value.
func encodeOp(op Op) (encodedOp, error) {
	verb := opPut
	if op.Delete {
		verb = opDel
	}
	if op.Key == "" {
		return encodedOp{}, fmt.Errorf("store: %s: empty key", verb)
	}
	if !utf8.ValidString(op.Key) {
		return encodedOp{}, fmt.Errorf("store: %s %q: key is not valid UTF-8", verb, op.Key)
	}
	e := encodedOp{key: op.Key, del: op.Delete}
	if !op.Delete {
		c := op.Claim
		// Strip the monotonic reading: it does not survive a reload, and
		// Get must return the same value before and after a restart.
		c.ClaimedAt = c.ClaimedAt.Round(0)
		c.Deadline = c.Deadline.Round(0)
		if reason := checkClaim(&c); reason != "" {
			return encodedOp{}, fmt.Errorf("store: put %s: %s", op.Key, reason)
		}
		e.claim = c
	}
	e.line = encodeLine(op.Key, &e.claim, op.Delete)
	return e, nil
}

// checkClaim reports why c cannot be stored faithfully, or "". JSON would
// silently replace invalid UTF-8, and cannot encode years outside
// [0,9999]; either would make the reloaded row differ from the acknowledged
// one. The reason names the field, never its value.
func checkClaim(c *Claim) string {
	for _, f := range [...]struct{ name, v string }{
		{"id", c.ID}, {"token", c.Token}, {"address", c.Address},
		{"podUID", c.PodUID}, {"ownerUID", c.OwnerUID}, {"owner", c.Owner},
	} {
		if !utf8.ValidString(f.v) {
			return "field " + f.name + " is not valid UTF-8"
		}
	}
	for _, f := range [...]struct {
		name string
		year int
	}{{"claimedAt", c.ClaimedAt.Year()}, {"deadline", c.Deadline.Year()}} {
		if f.year < 0 || f.year > 9999 {
			return "field " + f.name + " has a year outside [0,9999]"
		}
	}
	return ""
}

// encodeLine frames the record for key (a tombstone if del) in one
// allocation. The body is byte-for-byte what json.Marshal(&record{...})
// produces (TestEncoderMatchesEncodingJSON and FuzzEncoderMatchesJSON pin
// this), so any JSON tool can read it, at a fraction of the cost: encoding
// runs once per commit, in the caller's goroutine.
func encodeLine(key string, c *Claim, del bool) []byte {
	n := frameBytes + 64 + len(key)
	if !del {
		n += 160 + len(c.ID) + len(c.Token) + len(c.Address) + len(c.PodUID) + len(c.OwnerUID) + len(c.Owner)
	}
	b := make([]byte, bodyOffset, n)
	if del {
		b = append(b, `{"op":"del","key":`...)
		b = appendJSONString(b, key)
		b = append(b, '}')
	} else {
		b = append(b, `{"op":"put","key":`...)
		b = appendJSONString(b, key)
		b = append(b, `,"claim":{"id":`...)
		b = appendJSONString(b, c.ID)
		b = append(b, `,"token":`...)
		b = appendJSONString(b, c.Token)
		b = append(b, `,"address":`...)
		b = appendJSONString(b, c.Address)
		b = append(b, `,"podUID":`...)
		b = appendJSONString(b, c.PodUID)
		b = append(b, `,"claimedAt":"`...)
		b = c.ClaimedAt.AppendFormat(b, time.RFC3339Nano) // = Time.MarshalJSON for years in [0,9999]
		b = append(b, `","deadline":"`...)
		b = c.Deadline.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
		if c.OwnerUID != "" {
			b = append(b, `,"ownerUID":`...)
			b = appendJSONString(b, c.OwnerUID)
		}
		if c.Owner != "" {
			b = append(b, `,"owner":`...)
			b = appendJSONString(b, c.Owner)
		}
		b = append(b, "}}"...)
	}
	return sealFrame(b)
}

// frame wraps an already encoded body in a checksummed line.
func frame(body []byte) []byte {
	b := make([]byte, bodyOffset, len(body)+frameBytes)
	return sealFrame(append(b, body...))
}

// sealFrame fills in the frame around b[bodyOffset:], the body.
func sealFrame(b []byte) []byte {
	const hexDigits = "0123456789abcdef"
	copy(b, framePrefix)
	sum := crc32Sum(b[bodyOffset:])
	for i := range crcDigits {
		b[len(framePrefix)+i] = hexDigits[(sum>>uint(28-4*i))&0xf]
	}
	copy(b[len(framePrefix)+crcDigits:], frameMid)
	return append(b, frameSuffix...)
}

// appendJSONString is encoding/json's string encoding with its default HTML
// escaping: ", \\ and control bytes escaped (\b \f \n \r \t by name), <, >
// and & as \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func crc32Sum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// errUnterminated, errBadFrame and errChecksum mark a line that is not a
// whole record: at the tail it is torn, anywhere else it is corruption.
var (
	errUnterminated = errors.New("unterminated record")
	errBadFrame     = errors.New("bad record frame")
	errChecksum     = errors.New("checksum mismatch")
)
