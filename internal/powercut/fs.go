package powercut

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
)

// FS is one mounted power-cut filesystem. Its methods are safe for
// concurrent use with the operations the kernel sends.
type FS struct {
	mu      sync.Mutex
	backing string
	root    *inode
	nextIno uint64
	inodes  []*inode // every inode of this mount, for a power cut
	rng     *rand.Rand
	seed    uint64

	dead      bool          // powered off: every operation fails with EIO
	off       chan struct{} // closed at the power cut
	trigger   *trigger      // a power cut armed by PowerCutAt
	failFsync fsyncMode     // what the next fsync does
	stats     Stats

	err error // see Err

	mnt     string
	unmount func() error // set by the platform's mount
}

type fsyncMode int

const (
	fsyncWorks fsyncMode = iota
	fsyncFailsOnce
	fsyncFails
)

// Stats counts what the filesystem saw since it was mounted.
type Stats struct {
	Fsyncs       int // file fsyncs and fdatasyncs that succeeded
	DirFsyncs    int // directory fsyncs that succeeded
	FailedFsyncs int // fsyncs of either kind failed by FailFsync
	Writes       int
	// At the power cut: sectors written but not synced, and of them those
	// that reached the disk anyway (KeepSome modes).
	UnsyncedSectors, KeptSectors int
}

// Op names a kind of operation, for PowerCutAt.
type Op int

const (
	OpWrite    Op = iota // write(2) to a file
	OpFsync              // fsync(2) or fdatasync(2) of a file
	OpDirFsync           // fsync(2) of a directory
	OpCreate             // creat(2), open(2) with O_CREAT of a new name, mkdir(2)
	OpRename             // rename(2)
)

func (o Op) String() string {
	switch o {
	case OpWrite:
		return "write"
	case OpFsync:
		return "fsync"
	case OpDirFsync:
		return "directory fsync"
	case OpCreate:
		return "create"
	case OpRename:
		return "rename"
	}
	return "op?"
}

type trigger struct {
	op   Op
	n    int
	mode Mode
}

func newFS(backing string, seed uint64) (*FS, error) {
	f := &FS{backing: backing, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), seed: seed,
		off: make(chan struct{})}
	root, err := f.loadImage(backing)
	if err != nil {
		return nil, fmt.Errorf("powercut: load %s: %w", backing, err)
	}
	f.root = root
	return f, nil
}

func (f *FS) newInode(dir bool, perm uint32) *inode {
	f.nextIno++
	n := newFile(f.nextIno, perm)
	if dir {
		n = newDir(f.nextIno, perm)
	}
	f.inodes = append(f.inodes, n)
	return n
}

// Dir is the mount point.
func (f *FS) Dir() string { return f.mnt }

// Backing is the backing directory.
func (f *FS) Backing() string { return f.backing }

// Seed is the seed of the random choices of power cuts, for the test log.
func (f *FS) Seed() uint64 { return f.seed }

// Stats returns the counters.
func (f *FS) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// FailFsync makes fsync and fdatasync (of files and directories) fail with
// EIO: only the next one if once, else every one until HealFsync.
func (f *FS) FailFsync(once bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failFsync = fsyncFails
	if once {
		f.failFsync = fsyncFailsOnce
	}
}

// HealFsync makes fsync work again.
func (f *FS) HealFsync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failFsync = fsyncWorks
}

// PowerCut stops the machine: from now on every operation on the mount
// fails with EIO, and the backing directory holds what survived under mode.
// Unmount the filesystem and Mount the backing directory again to restart.
func (f *FS) PowerCut(mode Mode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return fmt.Errorf("powercut: %s: already powered off", f.mnt)
	}
	return f.cut(mode)
}

// PowerCutAt arms a power cut for the moment the n-th operation of kind op
// (counted from now, n >= 1) arrives: that operation fails with EIO, as
// does everything after it, and the cut is made under mode. Off tells when
// it happened; Err reports a failure to write the surviving image.
func (f *FS) PowerCutAt(op Op, n int, mode Mode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trigger = &trigger{op: op, n: max(n, 1), mode: mode}
}

// Off is closed once the power is off.
func (f *FS) Off() <-chan struct{} { return f.off }

// Err reports whether the power cut, or a write through to the backing
// directory, failed to write the image: the backing directory is then not
// to be trusted.
func (f *FS) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// at counts an operation of kind op against an armed cut; it reports
// whether the power is now off. f.mu must be held.
func (f *FS) at(op Op) bool {
	if t := f.trigger; t != nil && t.op == op {
		if t.n--; t.n == 0 {
			f.trigger = nil
			if err := f.cut(t.mode); err != nil {
				f.err = err
			}
		}
	}
	return f.dead
}

// cut is PowerCut with f.mu held.
func (f *FS) cut(mode Mode) error {
	f.dead = true
	close(f.off)
	for _, n := range f.inodes {
		f.stats.UnsyncedSectors += len(n.dirty)
	}
	if mode != DropUnsynced {
		unit := int64(pageSize)
		if mode == KeepSomeSectors {
			unit = sectorSize
		}
		for _, n := range f.inodes {
			if n.dir {
				if len(diffEntries(n.durable, n.entries)) > 0 && f.rng.IntN(2) == 0 {
					n.syncDir()
				}
			} else {
				f.stats.KeptSectors += n.cut(f.rng, unit)
			}
		}
	}
	if err := f.writeImage(); err != nil {
		f.err = fmt.Errorf("powercut: write the surviving image to %s: %w", f.backing, err)
		return f.err
	}
	return nil
}

// syncAll makes everything durable, as a clean shutdown does.
func (f *FS) syncAll() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return nil
	}
	for _, n := range f.inodes {
		if n.dir {
			n.syncDir()
		} else {
			n.sync()
		}
	}
	f.dead = true
	close(f.off)
	return f.writeImage()
}

// fsync is fsync(2) or fdatasync(2) of n. Both make a file's data and size
// durable, and a directory's entries. f.mu must be held.
func (f *FS) fsync(n *inode) syscall.Errno {
	if f.dead {
		return syscall.EIO
	}
	if f.failFsync != fsyncWorks {
		if f.failFsync == fsyncFailsOnce {
			f.failFsync = fsyncWorks
		}
		f.stats.FailedFsyncs++
		if !n.dir {
			n.lose()
		}
		return syscall.EIO
	}
	var err error
	if n.dir {
		f.stats.DirFsyncs++
		err = f.mirrorDir(n, n.syncDir())
	} else {
		f.stats.Fsyncs++
		err = f.mirrorFile(n, n.sync())
	}
	if err != nil {
		// The backing directory no longer matches the durable image: the
		// test cannot trust anything after this, so stop the machine.
		f.err = fmt.Errorf("powercut: write through to %s: %w", f.backing, err)
		f.dead = true
		close(f.off)
		return syscall.EIO
	}
	return 0
}
