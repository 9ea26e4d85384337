package store

import (
	"fmt"
	"os"
)

// repair truncates a torn tail back to the end of the last whole record
// (version 1) or committed group (version 2) and fsyncs the result, so that
// the next append starts on a boundary.
//
// The dropped bytes belong to a commit that was never acknowledged: the
// writer acknowledges a group only after its whole write and its fsync
// returned, so a crash can tear only the group in flight. They are still
// kept, in a cut file beside the state file (keepCut), because they may
// hold the only copy of a release token of a VM sandboxd delivered while
// the commit was in flight. The log names the cut file and sizes, never the
// bytes (they may hold a token).
func (s *Store) repair(t *tornTail) error {
	// Invariant: the cut bytes are durable in their own file before the
	// truncate, so a crash between the two loses nothing.
	cut, err := s.keepCut(t)
	if err != nil {
		return err
	}
	s.lg.Warn("claim store: truncating torn tail; the cut bytes are kept in a cut file (docs/state-file.md)",
		"offset", t.offset, "dropped_bytes", t.size-t.offset, "cut_file", cut,
		"dropped_lines", t.records, "line", t.line, "reason", t.reason)
	if err := s.failpoint("repairTruncate"); err != nil {
		return fmt.Errorf("store: %s: truncate torn tail at byte offset %d: %w", s.path, t.offset, err)
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("store: %s: open to truncate torn tail: %w", s.path, err)
	}
	defer f.Close()
	if err := f.Truncate(t.offset); err != nil {
		return fmt.Errorf("store: %s: truncate torn tail at byte offset %d: %w", s.path, t.offset, err)
	}
	if _, err := s.syncFile(f); err != nil {
		return fmt.Errorf("store: %s: fsync after truncating torn tail: %w", s.path, err)
	}
	return nil
}
