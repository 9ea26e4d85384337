package store

import (
	"fmt"
	"os"
	"time"
)

// fsyncFile makes f's contents, and the size needed to read them back,
// durable. On Linux it is fdatasync(2); elsewhere fsync(2).
func fsyncFile(f *os.File) error {
	if err := fdatasync(f); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}

// fsyncDir makes the entries of dir durable. A created or renamed file is
// not durable, whatever its own fsync said, until its directory is synced.
func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// FsyncDir is fsyncDir for the files other packages keep beside the state
// file (the holder id): one way to make a directory's entries durable.
func FsyncDir(dir string) error { return fsyncDir(dir) }

// syncFile is fsyncFile with the store's policy: skipped under
// UnsafeNoFsync, a failpoint for tests, and a warning above SlowFsync.
//
// A failed fsync is not retried (this is the rule's one statement; docs
// link here). An error here is final for the bytes it covers: after a
// failed fsync the kernel may have dropped the dirty pages and cleared the
// error, so a retry that succeeds proves nothing. Callers mark the store
// dirty instead, and the next commit rebuilds the file from memory before
// it appends (Store.commit, Store.rewrite).
func (s *Store) syncFile(f *os.File) (time.Duration, error) {
	if s.opts.UnsafeNoFsync {
		return 0, nil
	}
	if err := s.failpoint("fsyncFile"); err != nil {
		return 0, &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	start := time.Now()
	err := fsyncFile(f)
	took := time.Since(start)
	if took > s.opts.SlowFsync {
		s.lg.Warn("claim store: slow fsync", "file", f.Name(), "took", took, "threshold", s.opts.SlowFsync)
	}
	return took, err
}

// syncDir is fsyncDir of the state file's directory with the same policy.
func (s *Store) syncDir() error {
	if s.opts.UnsafeNoFsync {
		return nil
	}
	err := s.failpoint("fsyncDir")
	if err == nil {
		start := time.Now()
		err = fsyncDir(s.dir)
		if took := time.Since(start); took > s.opts.SlowFsync {
			s.lg.Warn("claim store: slow directory fsync", "dir", s.dir, "took", took, "threshold", s.opts.SlowFsync)
		}
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", s.dir, err)
	}
	return nil
}
