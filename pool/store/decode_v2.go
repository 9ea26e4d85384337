package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// decodeGroups replays a version 2 log from just after its header (hdr
// bytes long). The recovery rule, by group rather than by line:
//
//   - A group counts only when its commit marker matches it: the marker
//     starts where the previous committed group ended (len bytes after it),
//     the group has n lines, and its bytes have the marker's sum.
//   - Whatever follows the last committed group (records without a marker,
//     a marker that does not match, zeroed sectors, garbage, in any order)
//     is a torn tail: the group in flight when the machine stopped, which
//     was never acknowledged. A power cut may have written any subset of
//     its sectors, so damage followed by whole records is expected here.
//   - If a group that matches its own marker follows such damage, the
//     damage is not a tail: an acknowledged group after it was fsynced
//     later. That is corruption, as is an unusable record inside a
//     committed group.
func decodeGroups(path string, br *bufio.Reader, salt uint64, hdr int) (*loaded, error) {
	ld := &loaded{rows: map[string]row{}, version: formatVersion, salt: salt}
	g := &groupScan{path: path, salt: salt, start: int64(hdr), line: 2}
	off, line := int64(hdr), 1
	var acc []byte
	for {
		b, rerr := readLine(br, &acc)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, fmt.Errorf("store: %s: read at byte offset %d: %w", path, off, rerr)
		}
		if len(b) == 0 {
			break
		}
		line++
		if err := g.add(ld, b, off, line); err != nil {
			return nil, err
		}
		off += int64(len(b))
		if rerr != nil {
			break
		}
	}
	if g.lines > 0 {
		reason := "records without a commit marker"
		if g.bad != nil {
			reason = g.bad.reason
		}
		ld.torn = &tornTail{offset: g.start, size: off, header: int64(hdr), line: g.line, reason: reason, records: g.lines}
	}
	return ld, nil
}

// groupScan holds what follows the last committed group: the group being
// read, or a damaged region that is a torn tail unless a committed group
// follows it.
type groupScan struct {
	path  string
	salt  uint64
	start int64        // byte offset of the region: the end of the last committed group
	line  int          // line number of the region's first line
	buf   []byte       // the region's bytes
	recs  []pendingRec // its whole put and del records, in order
	lines int          // lines in the region
	bad   *badLine     // first line that is not a whole record, or first marker that does not match
	unfit *badLine     // first whole line whose content is unusable
}

type pendingRec struct {
	rec      record
	from, to int // the line in buf
}

type badLine struct {
	off    int64
	line   int
	reason string
}

// add takes line number line, b, found at byte offset off.
func (g *groupScan) add(ld *loaded, b []byte, off int64, line int) error {
	from := len(g.buf)
	g.buf = append(g.buf, b...)
	g.lines++
	rec, err := parseLine(b)
	switch {
	case err != nil && isFrameError(err):
		g.damage(off, line, err.Error())
	case err == nil && rec.Op == opFormat:
		err = errors.New("a second format header")
		fallthrough
	case err != nil:
		if g.unfit == nil {
			g.unfit = &badLine{off, line, err.Error()}
		}
	case rec.Op == opCommit:
		return g.commit(ld, rec, off, line)
	default:
		g.recs = append(g.recs, pendingRec{rec: rec, from: from, to: len(g.buf)})
	}
	return nil
}

func (g *groupScan) damage(off int64, line int, reason string) {
	if g.bad == nil {
		g.bad = &badLine{off, line, reason}
	}
}

// commit handles a whole marker at byte offset off: it commits the group
// it closes, reports corruption if it closes a group that starts after
// damage, or else counts as damage itself.
func (g *groupScan) commit(ld *loaded, m record, off int64, line int) error {
	sum, _ := parseHex(m.Sum, sumDigits)
	end := int(off - g.start) // the marker's position in buf
	begin := end - m.Len      // where its group starts in buf
	closes := func(b []byte) bool {
		return bytes.Count(b, []byte{'\n'}) == m.N && uint64(groupSum(g.salt, b)) == sum
	}
	switch {
	case begin == 0 && closes(g.buf[:end]):
		if first := firstOf(g.bad, g.unfit); first != nil {
			return &corruptError{Path: g.path, Offset: first.off, Line: first.line,
				Reason: first.reason + ", inside a committed group"}
		}
		for _, p := range g.recs {
			if p.rec.Op == opDel {
				delete(ld.rows, p.rec.Key)
			} else {
				ld.rows[p.rec.Key] = row{claim: *p.rec.Claim, line: bytes.Clone(g.buf[p.from:p.to])}
			}
		}
		ld.records += len(g.recs)
		g.reset(off+int64(len(g.buf)-end), line+1)
	case begin > 0 && begin < end && g.buf[begin-1] == '\n' && closes(g.buf[begin:end]):
		at := badLine{g.start, g.line, "records without a matching commit marker"}
		if first := firstOf(g.bad, g.unfit); first != nil && first.off < g.start+int64(begin) {
			at = *first
		}
		return &corruptError{Path: g.path, Offset: at.off, Line: at.line,
			Reason: fmt.Sprintf("%s, followed by a committed group at byte offset %d (line %d)",
				at.reason, g.start+int64(begin), line-m.N)}
	default:
		g.damage(off, line, "commit marker does not match its group")
	}
	return nil
}

// reset starts a new region at byte offset off, line line, keeping the
// buffers for reuse.
func (g *groupScan) reset(off int64, line int) {
	clear(g.recs)
	g.start, g.line = off, line
	g.buf, g.recs, g.lines = g.buf[:0], g.recs[:0], 0
	g.bad, g.unfit = nil, nil
}

func firstOf(a, b *badLine) *badLine {
	switch {
	case a == nil:
		return b
	case b == nil || a.off < b.off:
		return a
	default:
		return b
	}
}
