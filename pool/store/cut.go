package store

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// A cut file keeps what a startup repair cut from the state file:
// <base>.cut-<UTC time>-<random digits>, in the state file's directory.
// The name starts with the state file's own base name, so it cannot be
// taken for another file of the directory (the lock, a compaction temp
// file, a key file), and the fixed-width UTC time sorts it by time.
const (
	cutInfix  = ".cut-"
	cutLayout = "20060102T150405.000000000Z"
)

// CutFile is one kept cut beside a state file.
type CutFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// keepCut copies the torn tail t of the state file into a new cut file and
// makes it durable (the file, then its directory entry) before repair
// truncates anything, so a crash between the two keeps the bytes. A
// version 2 cut file starts with the state file's format header, so that
// `vk-sandbox claims salvage` reads it with the salt of the file it was
// cut from; then come the cut bytes as they were. It is created with
// O_EXCL (os.CreateTemp), so no repair ever overwrites an earlier one.
func (s *Store) keepCut(t *tornTail) (string, error) {
	src, err := os.Open(s.path)
	if err != nil {
		return "", fmt.Errorf("store: %s: open to keep the torn tail: %w", s.path, err)
	}
	defer src.Close()
	pattern := filepath.Base(s.path) + cutInfix + time.Now().UTC().Format(cutLayout) + "-*"
	f, err := os.CreateTemp(s.dir, pattern) // mode 0600
	if err != nil {
		return "", fmt.Errorf("store: %s: create a file to keep the torn tail: %w", s.path, err)
	}
	name := f.Name()
	fail := func(step string, err error) (string, error) {
		f.Close()
		return "", fmt.Errorf("store: %s: %s %s (the torn tail is not truncated): %w", s.path, step, name, err)
	}
	if _, err := io.Copy(f, io.NewSectionReader(src, 0, t.header)); err != nil {
		return fail("copy the format header to", err)
	}
	if _, err := io.Copy(f, io.NewSectionReader(src, t.offset, t.size-t.offset)); err != nil {
		return fail("copy the torn tail to", err)
	}
	if _, err := s.syncFile(f); err != nil {
		return fail("fsync", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("store: %s: close %s: %w", s.path, name, err)
	}
	if err := s.syncDir(); err != nil {
		return "", fmt.Errorf("store: %s: keeping the torn tail in %s: %w", s.path, name, err)
	}
	return name, nil
}

// CutFiles lists the cut files kept beside the state file path, oldest
// first. A directory that cannot be read has none to report.
func CutFiles(path string) []CutFile {
	dir, base := filepath.Split(filepath.Clean(path))
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir) // not Glob: the base name may hold metacharacters
	if err != nil {
		return nil
	}
	var out []CutFile
	for _, e := range entries {
		if !e.Type().IsRegular() || !isCutName(base, e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, CutFile{Path: filepath.Join(dir, e.Name()), Size: fi.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// isCutName reports whether name is exactly a cut file name of the state
// file base: <base>.cut-<cutLayout time>-<digits>, nothing before or after.
func isCutName(base, name string) bool {
	rest, ok := strings.CutPrefix(name, base+cutInfix)
	if !ok || len(rest) < len(cutLayout)+2 || rest[len(cutLayout)] != '-' {
		return false
	}
	if _, err := time.Parse(cutLayout, rest[:len(cutLayout)]); err != nil {
		return false
	}
	for _, c := range rest[len(cutLayout)+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isCutFile reports whether path names a cut file.
func isCutFile(path string) bool {
	name := filepath.Base(path)
	i := strings.LastIndex(name, cutInfix)
	return i > 0 && isCutName(name[:i], name)
}
