package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// Reasons a whole record is reported instead of kept.
const (
	lostUnacked    = "after the last commit marker: never acknowledged"
	lostUnverified = "in a group whose commit marker does not verify against this file's salt (a group of another log, or damaged): not applied"
	lostOutside    = "not inside the group its commit marker covers: not applied"
	lostNoSalt     = "in a group whose commit marker cannot be verified (the format header is damaged): not applied"
)

// salvageRead replays src by the salvage rule (see Salvage).
func salvageRead(src string) (map[string]Claim, SalvageReport, error) {
	var rep SalvageReport
	f, err := os.Open(src)
	if err != nil {
		return nil, rep, fmt.Errorf("store: salvage: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	head, err := br.Peek(len(framePrefix))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, rep, fmt.Errorf("store: salvage: %s: read: %w", src, err)
	}
	if len(head) > 0 && !looksLikeLog(head) {
		data, err := io.ReadAll(br)
		if err != nil {
			return nil, rep, fmt.Errorf("store: salvage: %s: read: %w", src, err)
		}
		ref, err := decodeReference(src, data)
		if err != nil {
			return nil, rep, err
		}
		out := make(map[string]Claim, len(ref))
		for k, r := range ref {
			out[k] = r.claim
		}
		rep.Records = len(out)
		return out, rep, nil
	}
	sv := &salvager{rows: map[string]Claim{}, rep: &rep}
	var (
		acc  []byte
		off  int64
		line int
	)
	rep.Version = 1
	for {
		b, rerr := readLine(br, &acc)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, rep, fmt.Errorf("store: salvage: %s: read at byte offset %d: %w", src, off, rerr)
		}
		if len(b) == 0 {
			break
		}
		line++
		if err := sv.line(src, b, off, line); err != nil {
			return nil, rep, err
		}
		off += int64(len(b))
		if rerr != nil {
			break
		}
	}
	if rep.Version == 1 {
		sv.apply(0) // a version 1 log has no markers: every whole record was acknowledged
	}
	for _, p := range sv.recs {
		sv.lose(p.off, p.line, lostUnacked, &p.rec)
	}
	// Reported in file order, whatever decided each loss.
	sort.SliceStable(rep.Lost, func(i, j int) bool { return rep.Lost[i].Offset < rep.Lost[j].Offset })
	return sv.rows, rep, nil
}

// salvager replays a log line by line. Like Open (decodeGroups), it applies
// a group only when its commit marker verifies: its sum, seeded with this
// file's salt, over exactly the len bytes before it, holding n lines. Unlike
// Open, damage does not stop it: the region since the last verified group
// is searched for the group the marker covers, and whatever is not in a
// verified group is reported, never applied.
type salvager struct {
	rows     map[string]Claim
	rep      *SalvageReport
	salt     uint64
	haveSalt bool          // the first line is a whole format header
	buf      []byte        // the region's lines since the last commit marker, markers excluded
	recs     []salvagedRec // its whole put and del records
}

type salvagedRec struct {
	rec  record
	off  int64
	line int
	at   int // the record's position in buf
}

func (sv *salvager) line(src string, b []byte, off int64, line int) error {
	rec, perr := parseLine(b)
	switch {
	case perr != nil:
		var whole *record
		if !isFrameError(perr) {
			whole = &rec
		}
		sv.lose(off, line, perr.Error(), whole)
	case rec.Op == opFormat && line == 1:
		if rec.Version != formatVersion {
			return &corruptError{Path: src, Line: 1,
				Reason: "log format version " + itoa(rec.Version) + " is not supported by this binary (written by a newer version?)"}
		}
		sv.rep.Version = formatVersion
		sv.salt, _ = parseHex(rec.Salt, saltDigits)
		sv.haveSalt = true
		return nil // the header is in no group
	case rec.Op == opFormat:
		sv.lose(off, line, "a second format header", nil)
	case rec.Op == opCommit:
		sv.rep.Version = formatVersion
		sv.commit(rec)
		return nil
	default:
		sv.recs = append(sv.recs, salvagedRec{rec: rec, off: off, line: line, at: len(sv.buf)})
	}
	if sv.haveSalt { // without a salt no marker can verify, and nothing needs the bytes
		sv.buf = append(sv.buf, b...)
	}
	return nil
}

// commit applies the group the marker m covers if the marker verifies, and
// reports every other whole record of the region: a marker whose sum does
// not verify under this file's salt may be a stale group of an older log
// (a power cut leaves the old file's blocks under a torn tail), and
// replaying its del records would drop acknowledged claims.
func (sv *salvager) commit(m record) {
	sum, _ := parseHex(m.Sum, sumDigits)
	end := len(sv.buf)
	begin := end - m.Len
	verified := sv.haveSalt && begin >= 0 && (begin == 0 || sv.buf[begin-1] == '\n') &&
		bytes.Count(sv.buf[begin:end], []byte{'\n'}) == m.N &&
		uint64(groupSum(sv.salt, sv.buf[begin:end])) == sum
	switch {
	case verified:
		for _, p := range sv.recs {
			if p.at < begin {
				sv.lose(p.off, p.line, lostOutside, &p.rec)
			}
		}
		sv.apply(begin)
	case !sv.haveSalt:
		sv.loseAll(lostNoSalt)
	default:
		sv.loseAll(lostUnverified)
	}
	sv.buf, sv.recs = sv.buf[:0], sv.recs[:0]
}

// apply replays the region's records from position begin of buf on.
func (sv *salvager) apply(begin int) {
	for _, p := range sv.recs {
		if p.at < begin {
			continue
		}
		if p.rec.Op == opDel {
			delete(sv.rows, p.rec.Key)
		} else {
			sv.rows[p.rec.Key] = *p.rec.Claim
		}
		sv.rep.Records++
	}
	sv.recs = sv.recs[:0]
}

func (sv *salvager) loseAll(reason string) {
	for _, p := range sv.recs {
		sv.lose(p.off, p.line, reason, &p.rec)
	}
	sv.recs = sv.recs[:0]
}

func (sv *salvager) lose(off int64, line int, reason string, rec *record) {
	l := SalvageLoss{Line: line, Offset: off, Reason: reason}
	if rec != nil {
		l.Op, l.Key = rec.Op, rec.Key
		if rec.Claim != nil {
			l.ID = rec.Claim.ID
		}
	}
	sv.rep.Lost = append(sv.rep.Lost, l)
}
