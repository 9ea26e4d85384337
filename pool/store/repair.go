package store

import (
	"fmt"
	"os"
)

// repair truncates a torn tail back to the end of the last whole record and
// fsyncs the result, so that the next append starts on a record boundary.
//
// The dropped bytes belong to a commit that was never acknowledged: the
// writer acknowledges a batch only after its whole write and its fsync
// returned, so a crash can tear only the batch in flight. They are logged by
// size only (they may hold a token) and not kept.
func (s *Store) repair(t *tornTail) error {
	s.lg.Warn("claim store: truncating torn tail",
		"offset", t.offset, "dropped_bytes", t.size-t.offset,
		"dropped_lines", t.records, "line", t.line, "reason", t.reason)
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
