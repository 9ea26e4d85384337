package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/segmentio/asm/base64"
)

// The silkd codec: answer frames are scanned by hand and request frames
// that carry data are appended by hand, because encoding/json's
// reflection and its base64 copy cost nine tenths of a session's CPU
// (BenchmarkAgentConnRecvStdout). The base64 is segmentio/asm's, whose
// AVX2 loops code a 32 KiB frame 11 to 17 times as fast as
// encoding/base64 (and which hands every byte they do not take, an
// invalid one, \r, \n or the padding, to encoding/base64, so it accepts
// and refuses what encoding/base64 does).
//
// decodeFrame's contract is encoding/json's: for any line it either
// produces exactly the Frame json.Unmarshal would, or an error where
// json.Unmarshal has one (FuzzDecodeFrame pins it). The scanner takes
// the frames silkd sends: a flat object whose known fields have plain
// values (no escapes, ASCII), and skips unknown fields of any JSON type.
// Anything else (an escape in a known field, a key that differs from a
// field's only by case, a field given twice, procs, a number out of
// range, a syntax error) is handed whole to encoding/json, which then
// decides: so the codec refuses nothing json accepts, and the rare
// frames (ps's procs, odd encodings) cost what they did before.

// maxSkipDepth is the deepest unknown value the scanner skips itself;
// deeper ones go to encoding/json, which has its own limit.
const maxSkipDepth = 64

// Known fields, as bits, so that a field given twice is noticed.
const (
	fType = 1 << iota
	fPid
	fCode
	fData
	fKind
	fMessage
	fVersion
	fProto
)

var knownKeys = []string{"type", "pid", "code", "data", "kind", "message", "version", "proto", "procs"}

// decodeFrame decodes line into f. f.Data is base64-decoded into dst's
// storage (grown when too small): it is valid until dst is reused. It
// returns the buffer to keep for the next frame.
func decodeFrame(line []byte, f *frame, dst []byte) ([]byte, error) {
	*f = frame{}
	s := scanner{b: line}
	if dst, ok := s.frame(f, dst); ok {
		return dst, nil
	}
	// The slow path: whatever the scanner did not take, json decides.
	// It decodes into a Frame of its own, so that only this path pays
	// for the one json makes escape to the heap (f stays on the caller's
	// stack).
	g := new(frame)
	err := json.Unmarshal(line, g)
	*f = *g
	return dst, err
}

type scanner struct {
	b []byte
	i int
}

// frame scans one object into f; ok false means: ask encoding/json.
func (s *scanner) frame(f *frame, dst []byte) (_ []byte, ok bool) {
	s.ws()
	if !s.eat('{') {
		return dst, false
	}
	var seen int
	s.ws()
	if s.eat('}') {
		return dst, s.end()
	}
	for {
		s.ws()
		key, ok := s.plainString()
		if !ok {
			return dst, false
		}
		s.ws()
		if !s.eat(':') {
			return dst, false
		}
		s.ws()
		bit := 0
		switch string(key) { // no allocation: the compiler compares in place
		case "type":
			bit, ok = fType, s.typeField(&f.Type)
		case "kind":
			bit, ok = fKind, s.stringField(&f.Kind)
		case "message":
			bit, ok = fMessage, s.stringField(&f.Message)
		case "version":
			bit, ok = fVersion, s.stringField(&f.Version)
		case "pid":
			bit, ok = fPid, s.intField(&f.Pid)
		case "proto":
			bit, ok = fProto, s.intField(&f.Proto)
		case "code":
			bit = fCode
			var n int
			if s.null() {
				f.Code = nil
			} else if ok = s.intField(&n); ok {
				f.Code = &n
			}
		case "data":
			bit = fData
			dst, ok = s.dataField(f, dst)
		default:
			// procs (a raw value) and case variants of a field are json's.
			if isKnownFold(key) {
				return dst, false
			}
			ok = s.skip(0)
		}
		if !ok || seen&bit != 0 {
			return dst, false
		}
		seen |= bit
		s.ws()
		if s.eat('}') {
			return dst, s.end()
		}
		if !s.eat(',') {
			return dst, false
		}
	}
}

// isKnownFold reports whether key names a field of Frame the way
// encoding/json matches them (case-insensitively), or is procs.
func isKnownFold(key []byte) bool {
	for _, k := range knownKeys {
		if bytes.EqualFold(key, []byte(k)) {
			return true
		}
	}
	return false
}

// end accepts only whitespace after the object, as json.Unmarshal does.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) null() bool {
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// plainString scans a string of printable ASCII without escapes, and
// returns its bytes in place; anything else is not plain.
func (s *scanner) plainString() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// stringField sets a string field; null leaves it as it is, as json does.
func (s *scanner) stringField(p *string) bool {
	if s.null() {
		return true
	}
	v, ok := s.plainString()
	if ok {
		*p = string(v)
	}
	return ok
}

// typeField is stringField for type, whose values on the hot path are
// constants: a data frame allocates nothing.
func (s *scanner) typeField(p *string) bool {
	if s.null() {
		return true
	}
	v, ok := s.plainString()
	if !ok {
		return false
	}
	switch string(v) {
	case "stdout":
		*p = "stdout"
	case "stderr":
		*p = "stderr"
	default:
		*p = string(v)
	}
	return true
}

// intField sets an int field from an integer literal; null leaves it.
// A fraction or exponent (json refuses them for an int) is not taken.
func (s *scanner) intField(p *int) bool {
	if s.null() {
		return true
	}
	start := s.i
	if !s.number() {
		return false
	}
	n, err := strconv.Atoi(string(s.b[start:s.i])) // a short literal: no escape to the heap
	if err != nil {
		return false
	}
	*p = n
	return true
}

// dataField base64-decodes data's string straight into dst: the string
// must be plain base64 (json would unescape first, so an escape is
// json's to decode); null leaves Data nil, "" makes it empty.
func (s *scanner) dataField(f *frame, dst []byte) ([]byte, bool) {
	if s.null() {
		f.Data = nil
		return dst, true
	}
	if !s.eat('"') {
		return dst, false
	}
	start := s.i
	end := bytes.IndexByte(s.b[start:], '"')
	if end < 0 {
		return dst, false
	}
	s.i = start + end + 1
	src := s.b[start : start+end]
	n := base64.StdEncoding.DecodedLen(len(src))
	if cap(dst) < n || dst == nil { // "" is empty data, not none: non-nil, as json makes it
		dst = make([]byte, n)
	}
	// Decode refuses a backslash (not in the alphabet), so an escaped
	// string is never decoded raw. It skips \r and \n, which json refuses
	// unescaped in a string: a src with no byte skipped decodes to
	// exactly len/4*3 less its padding, so any other length means one was.
	m, err := base64.StdEncoding.Decode(dst[:n], src)
	if err != nil || len(src)%4 != 0 || m != len(src)/4*3-padding(src) {
		return dst, false
	}
	f.Data = dst[:m]
	return dst, true
}

// padding counts the '=' that end src (at most two in valid base64).
func padding(src []byte) int {
	n := 0
	for n < 2 && n < len(src) && src[len(src)-1-n] == '=' {
		n++
	}
	return n
}

// number scans a JSON integer literal: -?(0|[1-9][0-9]*). A fraction or
// exponent after it makes it not an integer.
func (s *scanner) number() bool {
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
	default:
		return false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return false
		}
	}
	return true
}

// appendStdin appends the stdin request frame carrying data (newline
// included) to dst: the bytes json.Marshal gives, base64 encoded in
// place. Empty data is "" (never null, which silkd refuses).
func appendStdin(dst, data []byte) []byte {
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, agentV, 10)
	dst = append(dst, `,"op":"stdin","data":"`...)
	dst = appendBase64(dst, data)
	return append(dst, "\"}\n"...)
}

// appendBase64 appends src, base64 encoded, to dst.
func appendBase64(dst, src []byte) []byte {
	n, m := len(dst), base64.StdEncoding.EncodedLen(len(src))
	dst = slices.Grow(dst, m)[:n+m]
	base64.StdEncoding.Encode(dst[n:], src)
	return dst
}

// errBadFrame wraps what was wrong with a frame.
func errBadFrame(err error) error { return fmt.Errorf("silkd: bad frame: %w", err) }
