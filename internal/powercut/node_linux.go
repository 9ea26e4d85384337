package powercut

import (
	"context"
	"sort"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is the kernel's handle on an inode. Nodes carry no state of their
// own: several may point at one inode (go-fuse keeps the first it saw for
// an inode number), and every operation works on the inode under FS.mu.
type node struct {
	fs.Inode
	f  *FS
	in *inode
}

var (
	_ fs.NodeLookuper  = (*node)(nil)
	_ fs.NodeGetattrer = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeReader    = (*node)(nil)
	_ fs.NodeWriter    = (*node)(nil)
	_ fs.NodeFsyncer   = (*node)(nil)
	_ fs.NodeFlusher   = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeMkdirer   = (*node)(nil)
	_ fs.NodeUnlinker  = (*node)(nil)
	_ fs.NodeRmdirer   = (*node)(nil)
	_ fs.NodeRenamer   = (*node)(nil)
	_ fs.NodeReaddirer = (*node)(nil)
	_ fs.NodeOpendirer = (*node)(nil)
	_ fs.NodeStatfser  = (*node)(nil)
)

// lock takes FS.mu and reports EIO once the power is off.
func (n *node) lock() syscall.Errno {
	n.f.mu.Lock()
	if n.f.dead {
		n.f.mu.Unlock()
		return syscall.EIO
	}
	return 0
}

func (n *node) unlock() { n.f.mu.Unlock() }

func (n *node) child(ctx context.Context, in *inode, out *fuse.EntryOut) *fs.Inode {
	fillAttr(in, &out.Attr)
	mode := uint32(syscall.S_IFREG)
	if in.dir {
		mode = syscall.S_IFDIR
	}
	return n.NewInode(ctx, &node{f: n.f, in: in}, fs.StableAttr{Mode: mode, Ino: in.ino})
}

func fillAttr(in *inode, a *fuse.Attr) {
	a.Ino = in.ino
	a.Mode = syscall.S_IFREG | in.perm
	a.Nlink = 1
	a.Size = uint64(len(in.data))
	if in.dir {
		a.Mode, a.Nlink, a.Size = syscall.S_IFDIR|in.perm, 2, 4096
	}
	a.Blksize = pageSize
	a.Blocks = (a.Size + 511) / 512
	a.SetTimes(&in.mtime, &in.mtime, &in.mtime)
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	c := n.in.entries[name]
	if c == nil {
		return nil, syscall.ENOENT
	}
	return n.child(ctx, c, out), 0
}

func (n *node) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	fillAttr(n.in, &out.Attr)
	return 0
}

func (n *node) Setattr(ctx context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	if size, ok := in.GetSize(); ok {
		if n.in.dir {
			return syscall.EISDIR
		}
		n.in.truncate(int64(size))
	}
	if mode, ok := in.GetMode(); ok {
		n.in.perm = mode & 0o7777
	}
	if mt, ok := in.GetMTime(); ok {
		n.in.mtime = mt
	}
	fillAttr(n.in, &out.Attr)
	return 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, 0, e
	}
	defer n.unlock()
	if flags&syscall.O_TRUNC != 0 {
		n.in.truncate(0)
	}
	return nil, 0, 0
}

func (n *node) Read(ctx context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	if off >= int64(len(n.in.data)) {
		return fuse.ReadResultData(nil), 0
	}
	k := copy(dest, n.in.data[off:])
	return fuse.ReadResultData(dest[:k]), 0
}

func (n *node) Write(ctx context.Context, _ fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return 0, e
	}
	defer n.unlock()
	if n.f.at(OpWrite) {
		return 0, syscall.EIO
	}
	n.in.write(data, off)
	n.f.stats.Writes++
	return uint32(len(data)), 0
}

func (n *node) Fsync(ctx context.Context, _ fs.FileHandle, flags uint32) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	op := OpFsync
	if n.in.dir {
		op = OpDirFsync
	}
	if n.f.at(op) {
		return syscall.EIO
	}
	return n.f.fsync(n.in)
}

func (n *node) Flush(ctx context.Context, _ fs.FileHandle) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	n.unlock()
	return 0 // close(2) makes nothing durable
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, nil, 0, e
	}
	defer n.unlock()
	c := n.in.entries[name]
	switch {
	case c != nil && flags&syscall.O_EXCL != 0:
		return nil, nil, 0, syscall.EEXIST
	case c != nil && c.dir:
		return nil, nil, 0, syscall.EISDIR
	case c != nil:
		if flags&syscall.O_TRUNC != 0 {
			c.truncate(0)
		}
	default:
		if n.f.at(OpCreate) {
			return nil, nil, 0, syscall.EIO
		}
		c = n.f.newInode(false, mode&0o7777)
		n.in.entries[name] = c
	}
	return n.child(ctx, c, out), nil, 0, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	if n.in.entries[name] != nil {
		return nil, syscall.EEXIST
	}
	if n.f.at(OpCreate) {
		return nil, syscall.EIO
	}
	c := n.f.newInode(true, mode&0o7777)
	n.in.entries[name] = c
	return n.child(ctx, c, out), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, false)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, true)
}

func (n *node) remove(name string, dir bool) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	c := n.in.entries[name]
	switch {
	case c == nil:
		return syscall.ENOENT
	case c.dir && !dir:
		return syscall.EISDIR
	case !c.dir && dir:
		return syscall.ENOTDIR
	case c.dir && len(c.entries) > 0:
		return syscall.ENOTEMPTY
	}
	delete(n.in.entries, name)
	return 0
}

// Rename within one directory; RENAME_NOREPLACE is honoured, RENAME_EXCHANGE
// and renames across directories are refused.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	to, ok := newParent.(*node)
	if !ok || to.in != n.in {
		return syscall.EXDEV
	}
	const noReplace, exchange = 1, 2
	if flags&exchange != 0 {
		return syscall.EINVAL
	}
	src, dst := n.in.entries[name], n.in.entries[newName]
	switch {
	case src == nil:
		return syscall.ENOENT
	case dst != nil && flags&noReplace != 0:
		return syscall.EEXIST
	case dst != nil && dst.dir && !src.dir:
		return syscall.EISDIR
	case dst != nil && !dst.dir && src.dir:
		return syscall.ENOTDIR
	case dst != nil && dst.dir && len(dst.entries) > 0:
		return syscall.ENOTEMPTY
	}
	if n.f.at(OpRename) {
		return syscall.EIO
	}
	if name != newName {
		n.in.entries[newName] = src
		delete(n.in.entries, name)
	}
	return 0
}

func (n *node) Opendir(ctx context.Context) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	n.unlock()
	return 0
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	list := make([]fuse.DirEntry, 0, len(n.in.entries))
	for name, c := range n.in.entries {
		mode := uint32(syscall.S_IFREG)
		if c.dir {
			mode = syscall.S_IFDIR
		}
		list = append(list, fuse.DirEntry{Name: name, Ino: c.ino, Mode: mode})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return fs.NewListDirStream(list), 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	n.unlock()
	out.Bsize, out.Frsize, out.NameLen = pageSize, pageSize, 255
	out.Blocks, out.Bfree, out.Bavail = 1<<20, 1<<19, 1<<19
	out.Files, out.Ffree = 1<<20, 1<<19
	return 0
}
