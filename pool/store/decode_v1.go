package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// decodeV1 replays a version 1 log: records without a header or commit
// markers, each acknowledged by its own group's fsync. The recovery rule: a
// line that is not a whole record (unterminated, bad frame, bad checksum)
// is a torn tail if no whole record follows it, and corruption if one does.
// A whole record with a bad body (checksum fine, content not) is never a
// torn write: it is corruption wherever it is. Open rewrites a version 1
// log into the current format right after loading it, so these rules only
// ever apply to files written by an older binary.
func decodeV1(path string, br *bufio.Reader) (*loaded, error) {
	ld := &loaded{rows: map[string]row{}, version: 1}
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
		if err == nil && rec.Op != opPut && rec.Op != opDel {
			err = errors.New("a version 2 " + rec.Op + " line in a version 1 log")
		}
		whole := err == nil || !isFrameError(err)
		switch {
		case torn != nil && whole:
			// A whole record after damage: the damage is not a tail.
			return nil, &corruptError{Path: path, Offset: torn.offset, Line: torn.line,
				Reason: torn.reason + ", followed by a whole record at line " + itoa(line)}
		case torn != nil:
			torn.records++
		case err != nil && whole:
			return nil, &corruptError{Path: path, Offset: off, Line: line, Reason: err.Error()}
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
