package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// corruptError is the startup error for a state file that is damaged
// somewhere other than its tail, or is in no known format. The store refuses
// to start: the file is the only authority to release this node's VMs, and
// guessing could lose a release credential. Reason never quotes file bytes.
type corruptError struct {
	Path   string
	Offset int64 // byte offset of the bad record (or of the JSON error)
	Line   int   // 1-based line of Offset
	Reason string
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("store: %s: corrupt at line %d (byte offset %d): %s; "+
		"refusing to start: this file is the only authority to release this node's VMs; keep it, and write the records that verify to a new file with vk-sandbox claims salvage (docs/state-file.md)",
		e.Path, e.Line, e.Offset, e.Reason)
}

// tornTail is a damaged end of the log that recovery truncates.
type tornTail struct {
	offset  int64 // truncate to this length: the end of the last whole record (v1) or committed group (v2)
	size    int64 // file size as found
	header  int64 // version 2: the format header's length, copied into the cut file (keepCut); 0 for version 1
	line    int
	reason  string
	records int // lines dropped
}

// loaded is the result of reading the state file.
type loaded struct {
	rows      map[string]row
	records   int       // put and del records in the log (after truncation)
	torn      *tornTail // nil when the log ends on a whole record or committed group
	reference bool      // the file was a JSON claims document
	version   int       // log format: 0 (no file, or nothing in it), 1 or formatVersion
	salt      uint64    // version 2: the salt of the file's commit markers
}

// load reads path. A missing or empty file is an empty table; a file that
// starts with the record frame (or with a prefix of it, possibly followed
// by zeros: a first write torn by a power cut) is a log; anything else must
// be a JSON claims document.
func load(path string) (*loaded, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return &loaded{rows: map[string]row{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: %s: open: %w", path, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	head, err := br.Peek(len(framePrefix))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("store: %s: read: %w", path, err)
	}
	switch {
	case len(head) == 0:
		return &loaded{rows: map[string]row{}}, nil
	case looksLikeLog(head):
		return decodeLog(path, br)
	default:
		data, err := io.ReadAll(br)
		if err != nil {
			return nil, fmt.Errorf("store: %s: read: %w", path, err)
		}
		rows, err := decodeReference(path, data)
		if err != nil {
			return nil, err
		}
		return &loaded{rows: rows, records: len(rows), reference: true}, nil
	}
}

// looksLikeLog reports whether head, the file's first bytes, can start a
// log: a prefix of the record frame, possibly followed by zeros. A JSON
// claims document cannot contain a NUL byte at all.
func looksLikeLog(head []byte) bool {
	for i, c := range head {
		if c == 0 {
			return true
		}
		if c != framePrefix[i] {
			return false
		}
	}
	return true
}

// decodeLog reads a log of either version: one whose first line is a
// whole format header is version 2; any other is version 1, including a
// file whose first line is damaged (a version 2 header torn by a power cut
// before its first fsync is a torn tail by the version 1 rules too, since
// nothing can follow it).
func decodeLog(path string, br *bufio.Reader) (*loaded, error) {
	salt, n, ok, err := readHeader(path, br)
	if err != nil {
		return nil, err
	}
	if !ok {
		return decodeV1(path, br)
	}
	return decodeGroups(path, br, salt, n)
}

// maxHeader bounds the first line of a version 2 log.
const maxHeader = 128

// readHeader consumes the format header, if the log starts with a whole
// one, and returns its salt and length. A whole header of another version
// is a *corruptError: this binary cannot know how to read it.
func readHeader(path string, br *bufio.Reader) (salt uint64, n int, ok bool, err error) {
	head, _ := br.Peek(maxHeader) // short at the end of the file; any read error recurs below
	i := bytes.IndexByte(head, '\n')
	if i < 0 {
		return 0, 0, false, nil
	}
	rec, perr := parseLine(head[:i+1])
	if perr != nil || rec.Op != opFormat {
		return 0, 0, false, nil
	}
	if rec.Version != formatVersion {
		return 0, 0, false, &corruptError{Path: path, Line: 1,
			Reason: "log format version " + itoa(rec.Version) + " is not supported by this binary (written by a newer version?)"}
	}
	salt, _ = parseHex(rec.Salt, saltDigits)
	if _, err := br.Discard(i + 1); err != nil {
		return 0, 0, false, fmt.Errorf("store: %s: read: %w", path, err)
	}
	return salt, i + 1, true, nil
}

// parseLine decodes one line (with its newline). Frame errors (see
// isFrameError) mean the line is not a whole record; any other error means
// it is whole but its content is unusable.
func parseLine(b []byte) (record, error) {
	var rec record
	n := len(b)
	if b[n-1] != '\n' {
		return rec, errUnterminated
	}
	if n < frameBytes+2 || string(b[:len(framePrefix)]) != framePrefix ||
		string(b[len(framePrefix)+crcDigits:bodyOffset]) != frameMid ||
		string(b[n-len(frameSuffix):]) != frameSuffix {
		return rec, errBadFrame
	}
	want, ok := parseHex32(b[len(framePrefix) : len(framePrefix)+crcDigits])
	if !ok {
		return rec, errBadFrame
	}
	body := b[bodyOffset : n-len(frameSuffix)]
	if crc32Sum(body) != want {
		return rec, errChecksum
	}
	if err := decodeBody(body, &rec); err != nil {
		return rec, errors.New("record body: " + jsonReason(err))
	}
	switch rec.Op {
	case opDel, opPut:
		if rec.Key == "" {
			return rec, errors.New("record with an empty key")
		}
		if rec.Op == opDel {
			break
		}
		if rec.Claim == nil {
			return rec, fmt.Errorf("put %s without a claim", rec.Key)
		}
		if reason := checkClaim(rec.Claim); reason != "" {
			return rec, fmt.Errorf("put %s: %s", rec.Key, reason)
		}
	case opCommit:
		if _, ok := parseHex(rec.Sum, sumDigits); !ok || rec.N < 1 || rec.Len < rec.N {
			return rec, errors.New("malformed commit marker")
		}
	case opFormat:
		if _, ok := parseHex(rec.Salt, saltDigits); !ok || rec.Version < 1 {
			return rec, errors.New("malformed format header")
		}
	default:
		return rec, fmt.Errorf("unknown record op %.32q (written by a newer version?)", rec.Op)
	}
	return rec, nil
}

func isFrameError(err error) bool {
	return err == errUnterminated || err == errBadFrame || err == errChecksum
}

// readLine returns the next line including its newline. At the end of the
// file it returns the unterminated remainder (possibly empty) and io.EOF.
// acc is reused for lines longer than the reader's buffer.
func readLine(br *bufio.Reader, acc *[]byte) ([]byte, error) {
	b, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return b, err
	}
	*acc = append((*acc)[:0], b...)
	for {
		b, err = br.ReadSlice('\n')
		*acc = append(*acc, b...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return *acc, err
		}
	}
}

func parseHex32(b []byte) (uint32, bool) {
	var v uint32
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | uint32(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uint32(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// parseHex parses exactly digits lowercase hex digits, as the encoders
// write them.
func parseHex(s string, digits int) (uint64, bool) {
	if len(s) != digits {
		return 0, false
	}
	var v uint64
	for i := range len(s) {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			v = v<<4 | uint64(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// jsonReason describes a JSON error without quoting the input: a syntax
// error message can carry a byte of a token.
func jsonReason(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tim *time.ParseError
	switch {
	case errors.As(err, &syn):
		return "malformed JSON at byte " + itoa(int(syn.Offset))
	case errors.As(err, &typ):
		return "JSON field " + typ.Field + " has the wrong type (" + typ.Value + ")"
	case errors.As(err, &tim):
		return "bad time: " + tim.Error()
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	default:
		return "invalid JSON"
	}
}

func itoa(n int) string { return fmt.Sprint(n) }
