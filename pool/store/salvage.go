package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// SalvageReport is what Salvage kept and what it could not keep. It names
// keys, sandbox IDs, lines and byte offsets, never a token.
type SalvageReport struct {
	Version int // the source's log format: 1 or 2; 0 for a JSON claims document
	Records int // whole put and del records replayed into the new file
	Kept    int // rows written to the new file
	Lost    []SalvageLoss
}

// SalvageLoss is one line of the source that Salvage did not keep.
type SalvageLoss struct {
	Line   int
	Offset int64
	Reason string
	Key    string // the record's Pod key, when the line is whole
	ID     string // the record's sandbox ID, for a whole put
}

// salvageGroup bounds the records of one commit of the new file, as
// compaction bounds its groups.
const salvageGroup = snapshotGroup

// Salvage reads the state file src, keeps every record whose own checksum
// verifies, and writes the resulting table to dst, a new file, through the
// store's normal write path (Open, Apply, Close: fsynced, mode 0600). It
// never writes to src, and refuses a dst that exists.
//
// The rule is per record, not per group, so damage in the middle of a log
// costs only the damaged lines: the records of a group whose marker no
// longer matches are kept when each verifies and a commit marker follows
// them. Records after the last commit marker of a version 2 log were never
// acknowledged (the torn tail Open drops) and are reported, not kept. A
// version 1 log has no markers: every whole record counts. A reference
// document is kept whole if it parses and refused if it does not.
func Salvage(src, dst string, o Options) (SalvageReport, error) {
	rows, rep, err := salvageRead(src)
	if err != nil {
		return rep, err
	}
	// O_EXCL: an existing dst, even one created a moment ago, is never
	// overwritten. Open then finds it empty and writes its header.
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return rep, fmt.Errorf("store: salvage: %w", err)
	}
	if err := f.Close(); err != nil {
		return rep, fmt.Errorf("store: salvage: %w", err)
	}
	s, err := Open(dst, o)
	if err != nil {
		return rep, err
	}
	ops := make([]Op, 0, salvageGroup)
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		err := s.Apply(context.Background(), ops...)
		ops = ops[:0]
		return err
	}
	for k, c := range rows {
		ops = append(ops, Op{Key: k, Claim: c})
		if len(ops) == salvageGroup {
			if err = flush(); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = flush()
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, fmt.Errorf("store: salvage: writing %s: %w", dst, err)
	}
	rep.Kept = len(rows)
	return rep, nil
}

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

	rows := map[string]Claim{}
	type pending struct {
		rec  record
		off  int64
		line int
	}
	var (
		group []pending // whole records since the last commit marker
		acc   []byte
		off   int64
		line  int
	)
	apply := func() {
		for _, p := range group {
			if p.rec.Op == opDel {
				delete(rows, p.rec.Key)
			} else {
				rows[p.rec.Key] = *p.rec.Claim
			}
		}
		rep.Records += len(group)
		group = group[:0]
	}
	lose := func(off int64, line int, reason string, rec *record) {
		l := SalvageLoss{Line: line, Offset: off, Reason: reason}
		if rec != nil {
			l.Key = rec.Key
			if rec.Claim != nil {
				l.ID = rec.Claim.ID
			}
		}
		rep.Lost = append(rep.Lost, l)
	}
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
		rec, perr := parseLine(b)
		switch {
		case perr != nil:
			var whole *record
			if !isFrameError(perr) {
				whole = &rec
			}
			lose(off, line, perr.Error(), whole)
		case rec.Op == opFormat && line == 1:
			if rec.Version != formatVersion {
				return nil, rep, &CorruptError{Path: src, Line: 1,
					Reason: "log format version " + itoa(rec.Version) + " is not supported by this binary (written by a newer version?)"}
			}
			rep.Version = formatVersion
		case rec.Op == opFormat:
			lose(off, line, "a second format header", nil)
		case rec.Op == opCommit:
			rep.Version = formatVersion
			apply()
		default:
			group = append(group, pending{rec: rec, off: off, line: line})
		}
		off += int64(len(b))
		if rerr != nil {
			break
		}
	}
	if rep.Version == 1 {
		apply()
	}
	for _, p := range group {
		lose(p.off, p.line, "after the last commit marker: never acknowledged", &p.rec)
	}
	return rows, rep, nil
}
