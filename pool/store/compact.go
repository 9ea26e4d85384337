package store

import (
	"bufio"
	"fmt"
	"os"
	"time"
)

// maybeCompact rewrites the log once it holds more than
// max(CompactMin, 2*live) records. A rewrite costs O(live) and leaves live
// records, so at least max(CompactMin, live) appends separate two rewrites:
// O(1) amortized per record. It runs on the writer, after the batch that
// crossed the threshold was acknowledged.
func (s *Store) maybeCompact() {
	live := len(s.rows) // the writer is the only mutator: no lock needed to read
	if s.records <= max(s.opts.CompactMin, 2*live) || s.records < s.compactAt {
		return
	}
	if err := s.rewrite("compact"); err != nil {
		// The old log is still whole (or, after a rename, dirty and rebuilt
		// by the next commit). Back off so a full disk does not turn every
		// commit into an O(n) attempt.
		s.compactAt = s.records + max(s.opts.CompactMin, live)
		s.lg.Warn("claim store: compaction failed; will retry later", "err", err, "retry_at_records", s.compactAt)
	}
}

// rewrite replaces the file with a snapshot of rows: a normal log holding one
// put record per row. It writes a temp file in the same directory, fsyncs
// it, renames it over the state file and fsyncs the directory; the rename is
// the commit point. On success f is the new file, positioned at its end.
//
// It serves compaction, recovery from a failed commit (dirty), migration of
// the reference format, and Close. A failure before the rename leaves the
// old file in place and changes nothing. A failure after it (the directory
// fsync) switches f to the new file but leaves the store dirty, so nothing
// is acknowledged until a later rewrite fsyncs the directory.
func (s *Store) rewrite(why string) error {
	start := time.Now()
	tmp, err := os.CreateTemp(s.dir, s.tmpPattern())
	if err != nil {
		return fmt.Errorf("store: %s: %s: create temp file: %w", s.path, why, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// CreateTemp uses 0600 already; say so where it matters.
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("store: %s: %s: chmod %s: %w", s.path, why, tmp.Name(), err)
	}
	if s.wbuf == nil {
		s.wbuf = bufio.NewWriterSize(nil, 256<<10) // kept: compaction is periodic
	}
	w := s.wbuf
	w.Reset(tmp)
	defer w.Reset(nil)
	var size int64
	for _, r := range s.rows {
		n, _ := w.Write(r.line) // a write error sticks and is returned by Flush
		size += int64(n)
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
	if err := s.failpoint("rename"); err != nil {
		return fmt.Errorf("store: %s: %s: rename %s: %w", s.path, why, tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("store: %s: %s: %w", s.path, why, err)
	}
	renamed = true
	if old := s.f; old != nil {
		// An unlinked inode now, never written again. Freeing its blocks can
		// take a while (more so with -o discard): not on the commit path.
		go old.Close()
	}
	s.f, s.records = tmp, len(s.rows)
	if err := s.syncDir(); err != nil {
		s.dirty = true
		return fmt.Errorf("store: %s: %s: after rename: %w", s.path, why, err)
	}
	s.dirty = false
	s.compactAt = 0
	s.lg.Info("claim store: rewrote state file", "why", why, "rows", len(s.rows),
		"bytes", size, "took", time.Since(start))
	return nil
}
