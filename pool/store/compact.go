package store

import (
	"fmt"
	"hash/crc32"
	"os"
	"time"
)

// compaction is a rewrite of the log that runs beside the writer. The
// writer takes a snapshot of the table (the put line of every live row) and
// a compactor goroutine writes and fsyncs it to a temp file, while the
// writer goes on appending to the old log and acknowledging from it. Every
// batch acknowledged after the snapshot is also kept in tail. Once the
// snapshot is durable, the writer (between two batches) appends tail to the
// temp file, fsyncs it and renames it over the state file. Snapshot plus
// tail replays to the table as it is at the switch, so the new file loses
// nothing, and until the rename the old log stays whole and authoritative.
//
// The new file has its own salt, so the groups of the tail are re-sealed
// for it (sealGroups) rather than copied with their old markers.
type compaction struct {
	tmp    *os.File
	salt   uint64      // the new file's
	rows   int         // records in the snapshot
	tail   []byte      // records acknowledged from the old log since the snapshot
	groups []tailGroup // tail's groups, in order
	tailN  int         // records in tail
	done   chan error  // buffered; the compactor's one result
	start  time.Time
}

// maybeCompact runs on the writer after every acknowledged batch. It
// finishes a compaction whose snapshot is durable, or starts one.
//
// The compaction bound (this is its one statement; docs link here): a
// compaction starts once the log holds more than max(CompactMin, 2*live)
// records, live being the rows in the table. A rewrite costs O(live) and
// leaves about live records, so at least max(CompactMin, live) appends
// separate two rewrites: O(1) amortized per record. After a failed
// compaction the next one waits for another max(CompactMin, live) records
// (compactEnded); apart from that, the log exceeds the bound only by the
// commits made while one compaction runs. The writer's own O(live) share
// is one copy of the row pointers; the bytes and their fsync are the
// compactor's.
func (s *Store) maybeCompact() {
	if c := s.compacting; c != nil {
		select {
		case err := <-c.done:
			s.compacting = nil
			if err == nil {
				err = s.switchTo(c)
			} else {
				discard(c.tmp)
			}
			s.compactEnded(c.start, err)
		default: // the snapshot is still being written
		}
		return
	}
	live := len(s.rows) // the writer is the only mutator: no lock needed to read
	if s.records <= max(s.opts.CompactMin, 2*live) || s.records < s.compactAt {
		return
	}
	tmp, err := s.createTemp("compact")
	if err != nil {
		s.compactEnded(time.Now(), err)
		return
	}
	lines := s.snapshot()
	c := &compaction{tmp: tmp, salt: newSalt(), rows: len(lines), done: make(chan error, 1), start: time.Now()}
	s.compacting = c
	go func() { c.done <- s.writeSnapshot("compact", tmp, lines, c.salt) }()
}

// compactEnded reports a compaction that was installed (err nil) or
// failed, and backs off after a failure: the old log is still whole (or,
// after a rename, dirty and rebuilt by the next commit), and a full disk
// must not turn every commit into an O(n) attempt.
func (s *Store) compactEnded(start time.Time, err error) {
	records := s.records
	if err != nil {
		records = 0
		s.compactAt = s.records + max(s.opts.CompactMin, len(s.rows))
		s.lg.Warn("claim store: compaction failed; will retry later", "err", err, "retry_at_records", s.compactAt)
	}
	if s.opts.Observer != nil {
		s.opts.Observer.Compact(records, time.Since(start), err)
	}
}

// keepTail records a batch just acknowledged from the old log (its
// records, without their marker), so that the compaction in flight carries
// it into the new file as one group.
func (s *Store) keepTail(recs []byte, records int) {
	if c := s.compacting; c != nil {
		c.tail = append(c.tail, recs...)
		c.groups = append(c.groups, tailGroup{n: records, size: len(recs)})
		c.tailN += records
	}
}

// switchTo completes c on the writer: the tail goes after the durable
// snapshot, then the file is installed.
func (s *Store) switchTo(c *compaction) error {
	if len(c.groups) > 0 {
		buf := sealGroups(make([]byte, 0, len(c.tail)+len(c.groups)*128), c.tail, c.groups, c.salt)
		if _, err := c.tmp.Write(buf); err != nil {
			discard(c.tmp)
			return fmt.Errorf("store: %s: compact: write %s: %w", s.path, c.tmp.Name(), err)
		}
		if _, err := s.syncFile(c.tmp); err != nil {
			discard(c.tmp)
			return fmt.Errorf("store: %s: compact: fsync %s: %w", s.path, c.tmp.Name(), err)
		}
	}
	return s.install("compact", c.tmp, c.rows+c.tailN, c.salt, c.start)
}

// abandonCompaction waits for the compactor, if one runs, and drops its
// file. The writer calls it before a rewrite, which supersedes it, and Close
// calls it once the writer has stopped.
//
// A compaction that failed on its own is still reported as failed: whether
// the writer noticed its result at a batch boundary before the rewrite or
// Close came depends only on goroutine scheduling, and the count of failed
// compactions must not. One that succeeded but is dropped is not reported:
// it was never installed, and it did not fail.
func (s *Store) abandonCompaction() {
	if c := s.compacting; c != nil {
		err := <-c.done
		discard(c.tmp)
		s.compacting = nil
		if err != nil {
			s.compactEnded(c.start, err)
		}
	}
}

// rewrite replaces the file with a snapshot of rows, synchronously: a normal
// log holding one put record per row, with a new salt. It serves recovery
// from a failed commit (dirty), migration of the JSON claims document and of
// version 1 logs, and Close. A failure before the rename leaves the old file
// in place and changes nothing; see install for a failure after it.
func (s *Store) rewrite(why string) error {
	s.abandonCompaction()
	start := time.Now()
	tmp, err := s.createTemp(why)
	if err != nil {
		return err
	}
	lines := s.snapshot()
	salt := newSalt()
	if err := s.writeSnapshot(why, tmp, lines, salt); err != nil {
		discard(tmp)
		return err
	}
	return s.install(why, tmp, len(lines), salt, start)
}

// createTemp makes the file a rewrite is written to, in the state file's
// directory so that the rename is atomic.
func (s *Store) createTemp(why string) (*os.File, error) {
	tmp, err := os.CreateTemp(s.dir, s.tmpPattern())
	if err != nil {
		return nil, fmt.Errorf("store: %s: %s: create temp file: %w", s.path, why, err)
	}
	// CreateTemp uses 0600 already; say so where it matters.
	if err := tmp.Chmod(0o600); err != nil {
		discard(tmp)
		return nil, fmt.Errorf("store: %s: %s: chmod %s: %w", s.path, why, tmp.Name(), err)
	}
	return tmp, nil
}

// snapshot is the put line of every live row. The lines are never modified
// once stored, so the compactor may read them while the writer goes on.
func (s *Store) snapshot() [][]byte {
	lines := make([][]byte, 0, len(s.rows))
	for _, r := range s.rows {
		lines = append(lines, r.line)
	}
	return lines
}

// writeSnapshot writes a log holding lines to tmp, in the current format
// (a header for salt, then groups of at most snapshotGroup records), and
// fsyncs it. It may run on the compactor goroutine: it touches only tmp,
// lines and read-only options.
func (s *Store) writeSnapshot(why string, tmp *os.File, lines [][]byte, salt uint64) error {
	w := s.wbuf // one snapshot is written at a time: see rewrite and abandonCompaction
	w.Reset(tmp)
	defer w.Reset(nil)
	w.Write(encodeHeader(salt)) // a write error sticks and is returned by Flush
	var marker []byte
	for len(lines) > 0 {
		group := lines[:min(snapshotGroup, len(lines))]
		lines = lines[len(group):]
		sum, n := groupSeed(salt), 0
		for _, line := range group {
			w.Write(line)
			sum = crc32.Update(sum, castagnoli, line)
			n += len(line)
		}
		marker = appendMarkerSum(marker[:0], len(group), n, sum)
		w.Write(marker)
	}
	if err := s.failpoint("rewrite"); err != nil {
		return fmt.Errorf("store: %s: %s: write %s: %w", s.path, why, tmp.Name(), err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("store: %s: %s: write %s: %w", s.path, why, tmp.Name(), err)
	}
	if _, err := s.syncFile(tmp); err != nil {
		return fmt.Errorf("store: %s: %s: fsync %s: %w", s.path, why, tmp.Name(), err)
	}
	return nil
}

// install renames the durable tmp, a log holding records records and sealed
// with salt, over the state file and fsyncs the directory; the rename is the
// commit point. On success
// f is the new file, positioned at its end. A failure before the rename
// drops tmp and changes nothing. A failure after it (the directory fsync)
// switches f to the new file but leaves the store dirty, so nothing is
// acknowledged until a later rewrite fsyncs the directory.
func (s *Store) install(why string, tmp *os.File, records int, salt uint64, start time.Time) error {
	err := s.failpoint("rename")
	if err == nil {
		err = os.Rename(tmp.Name(), s.path)
	}
	if err != nil {
		discard(tmp)
		return fmt.Errorf("store: %s: %s: rename %s: %w", s.path, why, tmp.Name(), err)
	}
	if old := s.f; old != nil {
		// An unlinked inode now, never written again. Freeing its blocks can
		// take a while (more so with -o discard): not on the commit path.
		go old.Close()
	}
	s.f, s.records, s.salt = tmp, records, salt
	if err := s.syncDir(); err != nil {
		s.dirty = true
		return fmt.Errorf("store: %s: %s: after rename: %w", s.path, why, err)
	}
	s.dirty = false
	s.compactAt = 0
	s.lg.Info("claim store: rewrote state file", "why", why, "rows", len(s.rows),
		"records", records, "took", time.Since(start))
	return nil
}

// discard closes and removes a temp file that was not installed.
func discard(tmp *os.File) {
	tmp.Close()
	os.Remove(tmp.Name())
}
