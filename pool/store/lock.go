package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// lockFile takes the exclusive lock on path+".lock".
//
// The lock lives in a sibling file, not on the state file, because
// compaction renames a new inode over the state file: a lock held on the old
// inode would no longer exclude anyone. The lock file is never removed
// (removing it would let two openers lock two different inodes). flock is
// per open file description, so a second Open in the same process is refused
// too, and the kernel drops the lock when the process dies.
func lockFile(path string) (*os.File, error) {
	lp := path + ".lock"
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: %s: open lock file: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process (or another open Store)"
			if h := lockHolder(f); h != "" {
				holder = h
			}
			return nil, &LockedError{Path: path, Lock: lp, Holder: holder, Err: err}
		}
		return nil, fmt.Errorf("store: %s: flock %s: %w", path, lp, err)
	}
	return f, nil
}

// LockedError is the error for a state file whose lock another holder has:
// a running vk-sandbox (or another Store, or a salvage) uses the file.
type LockedError struct {
	Path, Lock string
	Holder     string // "pid 1234 (vk-sandbox)" when /proc/locks tells, else a description
	Err        error
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("store: %s is in use: %s holds the lock on %s: %v", e.Path, e.Holder, e.Lock, e.Err)
}

func (e *LockedError) Unwrap() error { return e.Err }

func unlockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: release lock %s: %w", f.Name(), err)
	}
	return nil
}

// makeDir creates the state directory (0700) and any missing parents, and
// fsyncs the parent of each directory it created: a new directory's entry
// is not durable until its parent is synced.
func (s *Store) makeDir() error {
	var missing []string
	for d := s.dir; ; d = filepath.Dir(d) {
		_, err := os.Lstat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	if s.opts.UnsafeNoFsync {
		return nil
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsyncDir(filepath.Dir(missing[i])); err != nil {
			return fmt.Errorf("fsync directory %s: %w", filepath.Dir(missing[i]), err)
		}
	}
	return nil
}

// checkDirMode warns about a state directory others can enter. It does not
// chmod it: the directory may be shared with files the store does not own.
func (s *Store) checkDirMode() {
	fi, err := os.Stat(s.dir)
	if err != nil {
		return
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		s.lg.Warn("claim store: state directory is accessible to group or others; 0700 is expected",
			"dir", s.dir, "mode", perm.String())
	}
}

// tmpPattern names compaction temp files: base.tmp-<random>.
func (s *Store) tmpPattern() string { return filepath.Base(s.path) + ".tmp-*" }

// removeStaleTemps deletes temp files left by a compaction that crashed
// before its rename. They are never authoritative: the rename is the commit
// point of a compaction.
func (s *Store) removeStaleTemps() {
	entries, err := os.ReadDir(s.dir) // not Glob: the base name may hold metacharacters
	if err != nil {
		return
	}
	prefix := filepath.Base(s.path) + ".tmp-"
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		n := filepath.Join(s.dir, e.Name())
		if err := os.Remove(n); err != nil {
			s.lg.Warn("claim store: cannot remove stale compaction file", "file", n, "err", err)
			continue
		}
		s.lg.Info("claim store: removed stale compaction file", "file", n)
	}
}
