package powercut

import (
	"maps"
	"math/rand/v2"
	"sort"
	"time"
)

// Mode says what of the unsynced state a power cut keeps.
type Mode int

const (
	// DropUnsynced keeps nothing that was not synced.
	DropUnsynced Mode = iota
	// KeepSomePages keeps a random subset of the unsynced 4 KiB pages of
	// every file, the new size of a file or its old one, and each
	// directory's unsynced entries or none of them.
	KeepSomePages
	// KeepSomeSectors is KeepSomePages with 512-byte sectors.
	KeepSomeSectors
)

func (m Mode) String() string {
	switch m {
	case DropUnsynced:
		return "drop-unsynced"
	case KeepSomePages:
		return "keep-some-pages"
	case KeepSomeSectors:
		return "keep-some-sectors"
	}
	return "mode?"
}

const (
	sectorSize = 512
	pageSize   = 4096
)

// inode is one file or directory. Every field is guarded by FS.mu.
type inode struct {
	ino   uint64
	dir   bool
	perm  uint32
	mtime time.Time

	// A file: data is what reads see (the page cache), disk what survives
	// a power cut, dirty the sectors written since they were synced.
	data  []byte
	disk  []byte
	dirty map[int64]struct{}

	// A directory: entries is the namespace as seen, durable what survives
	// a power cut.
	entries map[string]*inode
	durable map[string]*inode
}

func newFile(ino uint64, perm uint32) *inode {
	return &inode{ino: ino, perm: perm, mtime: time.Now(), dirty: map[int64]struct{}{}}
}

func newDir(ino uint64, perm uint32) *inode {
	return &inode{ino: ino, dir: true, perm: perm, mtime: time.Now(),
		entries: map[string]*inode{}, durable: map[string]*inode{}}
}

// write stores p at off in the page cache.
func (n *inode) write(p []byte, off int64) {
	end := off + int64(len(p))
	if old := int64(len(n.data)); end > old {
		n.data = append(n.data, make([]byte, end-old)...)
		n.markDirty(old, end) // the zeros of a hole are unsynced too
	}
	copy(n.data[off:], p)
	n.markDirty(off, end)
	n.mtime = time.Now()
}

// truncate sets the size in the page cache.
func (n *inode) truncate(size int64) {
	old := int64(len(n.data))
	switch {
	case size < old:
		n.data = n.data[:size]
		for s := range n.dirty {
			if s*sectorSize >= size {
				delete(n.dirty, s)
			}
		}
		if size%sectorSize != 0 {
			n.markDirty(size-1, size) // the last sector's tail is gone
		}
	case size > old:
		n.data = append(n.data, make([]byte, size-old)...)
		n.markDirty(old, size)
	}
	n.mtime = time.Now()
}

func (n *inode) markDirty(from, to int64) {
	for s := from / sectorSize; s*sectorSize < to; s++ {
		n.dirty[s] = struct{}{}
	}
}

// sync makes the page cache durable and returns the sectors it wrote.
func (n *inode) sync() []int64 {
	n.resizeDisk(int64(len(n.data)))
	written := sortedSectors(n.dirty)
	for _, s := range written {
		n.copySector(s)
	}
	clear(n.dirty)
	return written
}

// lose is what a failed fsync does to the pages it should have written:
// they stay in the page cache, clean, and never reach the disk.
func (n *inode) lose() { clear(n.dirty) }

// cut applies a power cut to a file: a random subset of its dirty units
// (of unit bytes) reaches the disk, and its size is the new one or the old
// one. It returns the number of dirty sectors kept.
func (n *inode) cut(rng *rand.Rand, unit int64) int {
	if len(n.data) != len(n.disk) && rng.IntN(2) == 0 {
		n.resizeDisk(int64(len(n.data)))
	}
	units, kept := map[int64]bool{}, 0
	for _, s := range sortedSectors(n.dirty) {
		u := s * sectorSize / unit
		keep, seen := units[u]
		if !seen {
			keep = rng.IntN(2) == 0
			units[u] = keep
		}
		if keep {
			n.copySector(s)
			kept++
		}
	}
	clear(n.dirty)
	return kept
}

// resizeDisk sets the durable size; new bytes read as zeros.
func (n *inode) resizeDisk(size int64) {
	if old := int64(len(n.disk)); size > old {
		n.disk = append(n.disk, make([]byte, size-old)...)
	} else {
		n.disk = n.disk[:size]
	}
}

// copySector copies sector s from the page cache to the disk, as far as
// both extend.
func (n *inode) copySector(s int64) {
	from := s * sectorSize
	to := min(from+sectorSize, int64(len(n.data)), int64(len(n.disk)))
	if from < to {
		copy(n.disk[from:to], n.data[from:to])
	}
}

// syncDir makes a directory's entries durable and returns the names whose
// durable entry changed.
func (n *inode) syncDir() []string {
	changed := diffEntries(n.durable, n.entries)
	n.durable = maps.Clone(n.entries)
	return changed
}

// diffEntries lists the names that differ between two namespaces.
func diffEntries(a, b map[string]*inode) []string {
	var names []string
	for name, x := range a {
		if b[name] != x {
			names = append(names, name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func sortedSectors(m map[int64]struct{}) []int64 {
	out := make([]int64, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// durablePath finds where the durable namespace under root holds target,
// relative to root.
func durablePath(root, target *inode) (string, bool) {
	if root == target {
		return ".", true
	}
	for name, child := range root.durable {
		if child == target {
			return name, true
		}
		if child.dir {
			if p, ok := durablePath(child, target); ok {
				return name + "/" + p, true
			}
		}
	}
	return "", false
}
