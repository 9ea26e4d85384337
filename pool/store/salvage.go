package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	Op     string // the record's op (put or del), when the line is whole
	Key    string // the record's Pod key, when the line is whole
	ID     string // the record's sandbox ID, for a whole put
}

// salvageGroup bounds the records of one commit of the new file, as
// compaction bounds its groups.
const salvageGroup = snapshotGroup

// Salvage reads the state file src, keeps the records that verify, and
// writes the resulting table to dst, a new file, through the store's normal
// write path (Open, Apply, Close: fsynced, mode 0600). It never writes to
// src, and refuses a dst that exists.
//
// It holds src's lock (the one Open takes) for its whole run, taken without
// waiting: a live vk-sandbox goes on acknowledging claims into src, and
// each of them would be missing from dst. So a locked src is refused with a
// *LockedError naming the holder when /proc/locks tells. A cut file
// (CutFiles) takes no lock: no store opens it and nothing writes it again.
//
// A version 2 log is replayed group by group, as Open does, but damage
// does not stop it: the records of a group count only when the group's
// commit marker verifies against this file's salt (its sum, seeded with the
// salt of the file's header, over the len bytes before it, holding n
// lines), wherever the group lies. Every other whole record is reported,
// never applied: one in a group whose marker does not verify (a damaged
// group, or a stale group of an older log that a power cut left under a
// torn tail, whose del records would drop acknowledged claims), one after
// the last marker (never acknowledged: the torn tail Open drops), and
// every record when the header is damaged, since no marker can then be
// verified. A version 1 log has no markers: every whole record counts. A
// reference document is kept whole if it parses and refused if it does not.
func Salvage(src, dst string, o Options) (SalvageReport, error) {
	unlock, err := salvageLock(src)
	if err != nil {
		return SalvageReport{}, err
	}
	defer unlock()
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

// salvageLock takes src's lock for the salvage (see Salvage) and returns
// its release.
func salvageLock(src string) (func(), error) {
	if _, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("store: salvage: %w", err)
	}
	if isCutFile(src) {
		return func() {}, nil
	}
	lock, err := lockFile(filepath.Clean(src))
	var le *LockedError
	switch {
	case errors.As(err, &le):
		return nil, fmt.Errorf("store: salvage refused: %w; a live vk-sandbox uses this file, and every claim it acknowledges after the salvage would be lost: stop the service first (docs/install.md), then salvage", err)
	case err != nil:
		return nil, fmt.Errorf("store: salvage: %w", err)
	}
	return func() { _ = unlockFile(lock) }, nil
}
