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

// CorruptError is the startup error for a state file that is damaged
// somewhere other than its tail, or is in no known format. The store refuses
// to start: the file is the only authority to release this node's VMs, and
// guessing could lose a release credential. Reason never quotes file bytes.
type CorruptError struct {
	Path   string
	Offset int64 // byte offset of the bad record (or of the JSON error)
	Line   int   // 1-based line of Offset
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("store: %s: corrupt at line %d (byte offset %d): %s; "+
		"refusing to start: this file is the only authority to release this node's VMs, so inspect and repair or move it by hand",
		e.Path, e.Line, e.Offset, e.Reason)
}

// tornTail is a damaged end of the log that recovery truncates.
type tornTail struct {
	offset  int64 // truncate to this length: the end of the last whole record
	size    int64 // file size as found
	line    int
	reason  string
	records int // damaged lines dropped
}

// loaded is the result of reading the state file.
type loaded struct {
	rows      map[string]row
	records   int       // whole records in the log (after truncation)
	torn      *tornTail // nil when the log ends on a whole record
	reference bool      // the file was in the reference format
}

// load reads path. A missing or empty file is an empty table; a file that
// starts with the record frame (or with a prefix of it: a torn first record)
// is a log; anything else must be a reference document.
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
	case bytes.HasPrefix([]byte(framePrefix), head):
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

// decodeLog replays the log. The recovery rule: a line that is not a whole
// record (unterminated, bad frame, bad checksum) is a torn tail if no whole
// record follows it, and corruption if one does. A whole record with a bad
// body (checksum fine, content not) is never a torn write: it is corruption
// wherever it is.
func decodeLog(path string, br *bufio.Reader) (*loaded, error) {
	ld := &loaded{rows: map[string]row{}}
	var (
		off  int64
		line int
		acc  []byte
		torn *tornTail
	)
	for {
		b, rerr := readLine(br, &acc)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, fmt.Errorf("store: %s: read at byte offset %d: %w", path, off, rerr)
		}
		if len(b) == 0 {
			break
		}
		line++
		rec, err := parseLine(b)
		whole := err == nil || !isFrameError(err)
		switch {
		case torn != nil && whole:
			// A whole record after damage: the damage is not a tail.
			return nil, &CorruptError{Path: path, Offset: torn.offset, Line: torn.line,
				Reason: torn.reason + ", followed by a whole record at line " + itoa(line)}
		case torn != nil:
			torn.records++
		case err != nil && whole:
			return nil, &CorruptError{Path: path, Offset: off, Line: line, Reason: err.Error()}
		case err != nil:
			torn = &tornTail{offset: off, line: line, reason: err.Error(), records: 1}
		default:
			ld.records++
			if rec.Op == opDel {
				delete(ld.rows, rec.Key)
			} else {
				ld.rows[rec.Key] = row{claim: *rec.Claim, line: bytes.Clone(b)}
			}
		}
		off += int64(len(b))
		if rerr != nil {
			break
		}
	}
	if torn != nil {
		torn.size = off
		ld.torn = torn
	}
	return ld, nil
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
	if rec.Key == "" {
		return rec, errors.New("record with an empty key")
	}
	switch rec.Op {
	case opDel:
	case opPut:
		if rec.Claim == nil {
			return rec, fmt.Errorf("put %s without a claim", rec.Key)
		}
		if reason := checkClaim(rec.Claim); reason != "" {
			return rec, fmt.Errorf("put %s: %s", rec.Key, reason)
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
