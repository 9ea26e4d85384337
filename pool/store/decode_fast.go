package store

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// decodeBody decodes a record body (whose checksum is already verified).
// Bodies in the exact shape encodeLine writes take a fast path; anything
// else, or anything the fast path is unsure of, goes to encoding/json. The
// fast path accepts only input that encoding/json decodes to the same
// record (FuzzFastDecodeMatchesJSON pins this), so it changes speed, never
// meaning: it is what keeps a 100k-row restart well under the budget.
func decodeBody(body []byte, rec *record) error {
	if fastDecodeOn && fastDecode(body, rec) {
		return nil
	}
	*rec = record{}
	return json.Unmarshal(body, rec)
}

// fastDecodeOn is false only in BenchmarkRestart's decode=json, which
// shows what the fast path earns (bench/HISTORY.md).
var fastDecodeOn = true

// fastDecode parses
//
//	{"op":"del","key":S}
//	{"op":"commit","n":D,"len":D,"sum":S}
//	{"op":"put","key":S,"claim":{"id":S,"token":S,"address":S,"podUID":S,"claimedAt":T,"deadline":T[,"ownerUID":S][,"owner":S]}}
//
// where every D is a JSON integer of at most 18 digits and every S is a string without escapes, control bytes or invalid UTF-8
// (for which encoding/json returns the bytes unchanged) and every T is a
// string that time.Time.UnmarshalJSON accepts (what encoding/json calls).
// All strings of a record share one allocation.
func fastDecode(b []byte, rec *record) bool {
	p := fastParser{b: b}
	if p.lit(`{"op":"del","key":`) {
		k, ok := p.str()
		if !ok || !p.lit("}") || len(p.b) != 0 {
			return false
		}
		*rec = record{Op: opDel, Key: string(k)}
		return true
	}
	if p.lit(`{"op":"commit","n":`) {
		return p.marker(rec)
	}
	var raw [7][]byte // key, id, token, address, podUID, ownerUID, owner
	var at, dl time.Time
	ok := p.lit(`{"op":"put","key":`) && p.strTo(&raw[0]) &&
		p.lit(`,"claim":{"id":`) && p.strTo(&raw[1]) &&
		p.lit(`,"token":`) && p.strTo(&raw[2]) &&
		p.lit(`,"address":`) && p.strTo(&raw[3]) &&
		p.lit(`,"podUID":`) && p.strTo(&raw[4]) &&
		p.lit(`,"claimedAt":`) && p.time(&at) &&
		p.lit(`,"deadline":`) && p.time(&dl)
	if ok && p.lit(`,"ownerUID":`) {
		ok = p.strTo(&raw[5])
	}
	if ok && p.lit(`,"owner":`) {
		ok = p.strTo(&raw[6])
	}
	if !ok || !p.lit("}}") || len(p.b) != 0 {
		return false
	}
	n := 0
	for _, r := range raw {
		n += len(r)
	}
	buf := make([]byte, 0, n)
	for _, r := range raw {
		buf = append(buf, r...)
	}
	all := string(buf)
	var f [7]string
	for i, r := range raw {
		f[i], all = all[:len(r)], all[len(r):]
	}
	*rec = record{Op: opPut, Key: f[0], Claim: &Claim{
		ID: f[1], Token: f[2], Address: f[3], PodUID: f[4],
		ClaimedAt: at, Deadline: dl, OwnerUID: f[5], Owner: f[6],
	}}
	return true
}

type fastParser struct{ b []byte }

func (p *fastParser) lit(s string) bool {
	if len(p.b) < len(s) || string(p.b[:len(s)]) != s {
		return false
	}
	p.b = p.b[len(s):]
	return true
}

// str consumes a plain JSON string and returns its contents.
func (p *fastParser) str() ([]byte, bool) {
	if len(p.b) == 0 || p.b[0] != '"' {
		return nil, false
	}
	ascii := true
	for i := 1; i < len(p.b); i++ {
		switch c := p.b[i]; {
		case c == '"':
			s := p.b[1:i]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			p.b = p.b[i+1:]
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (p *fastParser) strTo(dst *[]byte) bool {
	s, ok := p.str()
	*dst = s
	return ok
}

// time consumes a quoted timestamp exactly as encoding/json would: by
// handing the quoted bytes to Time.UnmarshalJSON.
func (p *fastParser) time(t *time.Time) bool {
	if len(p.b) == 0 || p.b[0] != '"' {
		return false
	}
	end := bytes.IndexByte(p.b[1:], '"') + 1
	if end == 0 || bytes.IndexByte(p.b[1:end], '\\') >= 0 {
		return false
	}
	if t.UnmarshalJSON(p.b[:end+1]) != nil {
		return false
	}
	p.b = p.b[end+1:]
	return true
}

// marker parses the rest of a commit marker, after its "n":.
func (p *fastParser) marker(rec *record) bool {
	var sum []byte
	n, ok := p.uint()
	if !ok || !p.lit(`,"len":`) {
		return false
	}
	size, ok := p.uint()
	if !ok || !p.lit(`,"sum":`) || !p.strTo(&sum) || !p.lit("}") || len(p.b) != 0 {
		return false
	}
	*rec = record{Op: opCommit, N: n, Len: size, Sum: string(sum)}
	return true
}

// uint consumes a non-negative JSON integer as encoding/json reads it into
// an int: no leading zero, no sign, fraction or exponent, and few enough
// digits that it cannot overflow.
func (p *fastParser) uint() (int, bool) {
	i, v := 0, 0
	for ; i < len(p.b) && i < 19 && '0' <= p.b[i] && p.b[i] <= '9'; i++ {
		v = v*10 + int(p.b[i]-'0')
	}
	if i == 0 || i > 18 || (i > 1 && p.b[0] == '0') {
		return 0, false
	}
	if i < len(p.b) {
		if c := p.b[i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	p.b = p.b[i:]
	return v, true
}
