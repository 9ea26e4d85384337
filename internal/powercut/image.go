package powercut

import (
	"fmt"
	"os"
	"path/filepath"
)

// The backing directory holds the durable image: the durable namespace
// under the root, each file with its durable contents. These functions keep
// it so; FS.mu is held by their callers.

// loadImage reads the backing directory into a tree whose page cache and
// disk both hold what is there.
func (f *FS) loadImage(dir string) (*inode, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	n := f.newInode(true, uint32(fi.Mode().Perm()))
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		var child *inode
		switch {
		case e.IsDir():
			if child, err = f.loadImage(p); err != nil {
				return nil, err
			}
		case e.Type().IsRegular():
			info, err := e.Info()
			if err != nil {
				return nil, err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			child = f.newInode(false, uint32(info.Mode().Perm()))
			child.data, child.disk = data, append([]byte(nil), data...)
		default:
			return nil, fmt.Errorf("powercut: %s: only regular files and directories are supported", p)
		}
		n.entries[e.Name()], n.durable[e.Name()] = child, child
	}
	return n, nil
}

// mirrorFile writes the sectors just synced of n, and its durable size, to
// the backing file, if n is in the durable namespace; otherwise they are
// written when a directory sync links it.
func (f *FS) mirrorFile(n *inode, sectors []int64) error {
	rel, ok := durablePath(f.root, n)
	if !ok {
		return nil
	}
	bf, err := os.OpenFile(filepath.Join(f.backing, rel), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	for _, s := range sectors {
		from := s * sectorSize
		if to := min(from+sectorSize, int64(len(n.disk))); from < to {
			if _, err := bf.WriteAt(n.disk[from:to], from); err != nil {
				bf.Close()
				return err
			}
		}
	}
	err = bf.Truncate(int64(len(n.disk)))
	if cerr := bf.Close(); err == nil {
		err = cerr
	}
	return err
}

// mirrorDir applies to the backing directory the durable entries of d that
// changed, if d is in the durable namespace.
func (f *FS) mirrorDir(d *inode, names []string) error {
	rel, ok := durablePath(f.root, d)
	if !ok {
		return nil
	}
	for _, name := range names {
		p := filepath.Join(f.backing, rel, name)
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		if child := d.durable[name]; child != nil {
			if err := writeTree(p, child); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeImage replaces the backing directory's contents with the durable
// tree.
func (f *FS) writeImage() error {
	ents, err := os.ReadDir(f.backing)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(f.backing, e.Name())); err != nil {
			return err
		}
	}
	for name, child := range f.root.durable {
		if err := writeTree(filepath.Join(f.backing, name), child); err != nil {
			return err
		}
	}
	return os.Chmod(f.backing, os.FileMode(f.root.perm))
}

// writeTree writes n's durable image at p.
func writeTree(p string, n *inode) error {
	if !n.dir {
		if err := os.WriteFile(p, n.disk, 0o600); err != nil {
			return err
		}
		return os.Chmod(p, os.FileMode(n.perm))
	}
	if err := os.Mkdir(p, 0o700); err != nil {
		return err
	}
	for name, child := range n.durable {
		if err := writeTree(filepath.Join(p, name), child); err != nil {
			return err
		}
	}
	return os.Chmod(p, os.FileMode(n.perm))
}
