// Package lazyfs is test tooling: a FUSE filesystem that loses, on a
// simulated power loss, everything that was not made durable, as LazyFS
// does for Jepsen. It is imported only by tests.
//
// A mount presents a backing directory. Everything written through the
// mount is held in memory (the "page cache") and read back from there; the
// backing directory receives a change only when the crash model below makes
// it durable, so at any moment the backing directory holds exactly the
// durable state. Crash discards the page cache: unmounted afterwards, the
// backing directory is what a machine would find after a power loss.
//
// The crash model:
//
//   - File contents and size (write, truncate, open with O_TRUNC) are
//     durable only after an fsync or fdatasync of that file, or at once for
//     a write through a descriptor opened with O_SYNC or O_DSYNC. Closing a
//     file makes nothing durable.
//   - Namespace changes (create, mkdir, rename, unlink, rmdir, chmod) are
//     journaled in the order they were made and all become durable at the
//     next fsync or fdatasync of any file or directory on the mount, before
//     the data that fsync writes. This is what ext4 (data=ordered) and XFS
//     give in practice: an fsync forces the metadata journal, which carries
//     every earlier namespace change, and nothing reorders them. It is
//     weaker than strict POSIX (where a new directory entry needs an fsync
//     of its directory) and stricter than ext4 (which also commits its
//     journal every few seconds and, with auto_da_alloc, flushes a file
//     replaced by rename).
//   - Times (atime, mtime) are never made durable; owners are not kept.
//
// The real fsync of the backing directory is never called: the simulated
// crash is the only crash, and the host is not powered off.
//
// Hard links, symbolic links, device nodes and extended attributes are not
// supported. The whole tree is held in memory: it is for small stores.
package lazyfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is one mount.
type FS struct {
	backing, mountpoint string
	server              *fuse.Server

	mu      sync.Mutex
	root    *node
	journal []metaOp // namespace changes not yet durable, oldest first
	crashed bool
	nextIno uint64
	err     error // the first failure to apply a change to the backing directory
	// syncs counts, per path, the fsyncs (and O_SYNC writes) that found
	// something to make durable.
	syncs map[string]int
}

// Mount mounts a lazyfs at mountpoint (an existing empty directory) over
// the backing directory, whose current contents are the durable state.
func Mount(backing, mountpoint string) (*FS, error) {
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	l := &FS{backing: backing, mountpoint: mountpoint, syncs: map[string]int{}}
	l.root = l.newNode(true, 0o755)
	l.root.inited = true // gofs.Mount sets up the root's Inode
	if err := l.load(l.root, backing); err != nil {
		return nil, fmt.Errorf("lazyfs: load %s: %w", backing, err)
	}
	zero := time.Duration(0)
	srv, err := gofs.Mount(mountpoint, l.root, &gofs.Options{
		// The kernel caches nothing about names or attributes: every
		// lookup sees the current tree, also after a rename.
		EntryTimeout: &zero,
		AttrTimeout:  &zero,
		MountOptions: fuse.MountOptions{
			// Mount with mount(2) directly: no fusermount binary needed.
			DirectMount: true,
			FsName:      "lazyfs",
			Name:        "lazyfs",
			MaxWrite:    1 << 20,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("lazyfs: mount %s: %w", mountpoint, err)
	}
	l.server = srv
	return l, nil
}

// Mountpoint is where the filesystem is mounted.
func (l *FS) Mountpoint() string { return l.mountpoint }

// Crash simulates a power loss: everything not yet durable is discarded,
// and every later operation on the mount fails with EIO. The backing
// directory keeps exactly what was durable. It returns what was lost: the
// files whose contents had changes not yet synced, and the namespace
// changes not yet journaled to disk, as "op path" lines.
func (l *FS) Crash() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lost := l.pendingLocked()
	l.crashed = true
	l.journal = nil
	l.root.dropData()
	return lost
}

// Pending lists what a crash now would lose (see Crash).
func (l *FS) Pending() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pendingLocked()
}

func (l *FS) pendingLocked() []string {
	var out []string
	for _, op := range l.journal {
		out = append(out, op.String())
	}
	var walk func(n *node)
	walk = func(n *node) {
		if !n.dir {
			if n.dirty {
				out = append(out, fmt.Sprintf("data %s (%d bytes in the page cache)", n.path(), len(n.data)))
			}
			return
		}
		for _, name := range sortedNames(n.children) {
			walk(n.children[name])
		}
	}
	walk(l.root)
	return out
}

// Syncs returns, per path, how many fsyncs or O_SYNC writes made changes of
// that file durable.
func (l *FS) Syncs() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.syncs))
	for k, v := range l.syncs {
		out[k] = v
	}
	return out
}

// Err is the first failure to apply a durable change to the backing
// directory: a fault of lazyfs, or of the backing filesystem.
func (l *FS) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Unmount unmounts. Call Crash first to simulate a power loss; unmounting
// without it keeps the page cache's changes that were never made durable
// out of the backing directory all the same (nothing is written on
// unmount).
func (l *FS) Unmount() error {
	if l.server == nil {
		return nil
	}
	err := l.server.Unmount()
	if err != nil {
		// Something still holds a file open (a killed process whose
		// descriptors the kernel has not released yet): detach now, the
		// kernel finishes the unmount when the last one closes.
		if derr := syscall.Unmount(l.mountpoint, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("lazyfs: unmount %s: %w (detach: %v)", l.mountpoint, err, derr)
		}
		l.server.Wait()
	}
	l.server = nil
	return nil
}

// load reads the backing directory into the tree: it is the durable state.
func (l *FS) load(dir *node, path string) error {
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(path, e.Name())
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			child := l.newNode(true, uint32(info.Mode().Perm()))
			dir.attach(e.Name(), child)
			if err := l.load(child, p); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			child := l.newNode(false, uint32(info.Mode().Perm()))
			child.data = data
			child.minSize = int64(len(data))
			dir.attach(e.Name(), child)
		default:
			return fmt.Errorf("%s: only directories and regular files are supported", p)
		}
	}
	return nil
}

func (l *FS) newNode(dir bool, perm uint32) *node {
	l.nextIno++
	return &node{lfs: l, dir: dir, ino: l.nextIno, perm: perm & 0o7777, mtime: time.Now(), children: map[string]*node{}}
}

// commitLocked makes every journaled namespace change durable, in order.
func (l *FS) commitLocked() syscall.Errno {
	for len(l.journal) > 0 {
		op := l.journal[0]
		if err := op.apply(l.backing); err != nil {
			l.fail(fmt.Errorf("apply %s: %w", op, err))
			return syscall.EIO
		}
		l.journal = l.journal[1:]
	}
	return 0
}

// syncDataLocked makes n's contents and size durable at its current path.
// Call commitLocked first: then the backing directory's names are the
// mount's.
func (l *FS) syncDataLocked(n *node) syscall.Errno {
	if !n.dirty {
		return 0
	}
	if n.parent == nil {
		// Unlinked: no name leads to these bytes after a crash.
		n.markClean()
		return 0
	}
	p := n.path()
	f, err := os.OpenFile(filepath.Join(l.backing, p), os.O_WRONLY, 0)
	if err != nil {
		l.fail(fmt.Errorf("sync %s: %w", p, err))
		return syscall.EIO
	}
	size := int64(len(n.data))
	// Bytes beyond the smallest size since the last sync were cut off and
	// may have come back as zeros: cut the durable file there first.
	err = f.Truncate(min(n.minSize, size))
	if err == nil && n.dirtyHi > n.dirtyLo {
		hi := min(n.dirtyHi, size)
		if hi > n.dirtyLo {
			_, err = f.WriteAt(n.data[n.dirtyLo:hi], n.dirtyLo)
		}
	}
	if err == nil {
		err = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		l.fail(fmt.Errorf("sync %s: %w", p, err))
		return syscall.EIO
	}
	n.markClean()
	l.syncs[p]++
	return 0
}

func (l *FS) fail(err error) {
	if l.err == nil {
		l.err = err
	}
}

func (l *FS) log(op metaOp) { l.journal = append(l.journal, op) }

// metaOp is one journaled namespace change, by path relative to the root
// at the time it was made: replayed in order, the paths are right again.
type metaOp struct {
	kind     string // mkdir, create, unlink, rmdir, rename, chmod
	path, to string
	perm     uint32
}

func (op metaOp) String() string {
	if op.kind == "rename" {
		return fmt.Sprintf("rename %s -> %s", op.path, op.to)
	}
	return op.kind + " " + op.path
}

func (op metaOp) apply(backing string) error {
	p := filepath.Join(backing, op.path)
	switch op.kind {
	case "mkdir":
		return os.Mkdir(p, fs.FileMode(op.perm))
	case "create":
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fs.FileMode(op.perm))
		if err != nil {
			return err
		}
		return f.Close()
	case "unlink", "rmdir":
		return os.Remove(p)
	case "rename":
		return os.Rename(p, filepath.Join(backing, op.to))
	case "chmod":
		return os.Chmod(p, fs.FileMode(op.perm))
	}
	return fmt.Errorf("unknown op %q", op.kind)
}

// node is a file or a directory. Every field is guarded by lfs.mu: the
// tree, not go-fuse's inode table, is the truth about names, so that a
// sync never races with the bookkeeping of a rename.
type node struct {
	gofs.Inode
	lfs      *FS
	inited   bool // the go-fuse Inode is set up
	dir      bool
	ino      uint64
	perm     uint32
	mtime    time.Time
	parent   *node // nil for the root and for unlinked nodes
	name     string
	children map[string]*node // directories

	// Files: the page cache's contents, and what differs from the durable
	// file: the written range [dirtyLo, dirtyHi) and the smallest size
	// since the last sync.
	data             []byte
	dirty            bool
	dirtyLo, dirtyHi int64
	minSize          int64
}

func (n *node) attach(name string, child *node) {
	n.children[name] = child
	child.parent, child.name = n, name
}

func (n *node) detach(name string) *node {
	child := n.children[name]
	delete(n.children, name)
	if child != nil {
		child.parent, child.name = nil, ""
	}
	return child
}

// path is the node's path relative to the root ("" for the root).
func (n *node) path() string {
	if n.parent == nil {
		return ""
	}
	return filepath.Join(n.parent.path(), n.name)
}

func (n *node) markClean() {
	n.dirty = false
	n.dirtyLo, n.dirtyHi = 0, 0
	n.minSize = int64(len(n.data))
}

func (n *node) markWritten(lo, hi int64) {
	if !n.dirty || n.dirtyHi <= n.dirtyLo {
		n.dirtyLo, n.dirtyHi = lo, hi
	} else {
		n.dirtyLo, n.dirtyHi = min(n.dirtyLo, lo), max(n.dirtyHi, hi)
	}
	n.dirty = true
}

func (n *node) truncate(size int64) {
	if size < int64(len(n.data)) {
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	n.minSize = min(n.minSize, size)
	n.dirty = true
	n.mtime = time.Now()
}

func (n *node) dropData() {
	n.data = nil
	for _, c := range n.children {
		c.dropData()
	}
}

func (n *node) fill(a *fuse.Attr) {
	a.Ino = n.ino
	a.Nlink = 1
	if n.dir {
		a.Mode = syscall.S_IFDIR | n.perm
		a.Nlink = 2
	} else {
		a.Mode = syscall.S_IFREG | n.perm
		a.Size = uint64(len(n.data))
		a.Blocks = (a.Size + 511) / 512
	}
	a.Blksize = 4096
	a.SetTimes(nil, &n.mtime, &n.mtime)
}

func (n *node) stable() gofs.StableAttr {
	mode := uint32(syscall.S_IFREG)
	if n.dir {
		mode = syscall.S_IFDIR
	}
	return gofs.StableAttr{Mode: mode, Ino: n.ino}
}

// inode returns the go-fuse Inode of child, a child of n, setting it up on
// first use.
func (n *node) inode(ctx context.Context, child *node) *gofs.Inode {
	if !child.inited {
		child.inited = true
		return n.NewPersistentInode(ctx, child, child.stable())
	}
	return &child.Inode
}

// handle is an open file: it remembers whether writes must be durable when
// they return.
type handle struct{ sync bool }

func openHandle(flags uint32) *handle {
	return &handle{sync: flags&syscall.O_DSYNC != 0} // O_SYNC includes O_DSYNC
}

var (
	_ gofs.NodeLookuper  = (*node)(nil)
	_ gofs.NodeGetattrer = (*node)(nil)
	_ gofs.NodeSetattrer = (*node)(nil)
	_ gofs.NodeOpener    = (*node)(nil)
	_ gofs.NodeCreater   = (*node)(nil)
	_ gofs.NodeMkdirer   = (*node)(nil)
	_ gofs.NodeUnlinker  = (*node)(nil)
	_ gofs.NodeRmdirer   = (*node)(nil)
	_ gofs.NodeRenamer   = (*node)(nil)
	_ gofs.NodeReaddirer = (*node)(nil)
	_ gofs.NodeReader    = (*node)(nil)
	_ gofs.NodeWriter    = (*node)(nil)
	_ gofs.NodeFsyncer   = (*node)(nil)
	_ gofs.NodeFlusher   = (*node)(nil)
	_ gofs.NodeStatfser  = (*node)(nil)
	_ gofs.NodeOnAdder   = (*node)(nil)
)

// OnAdd marks the root's Inode as set up by the mount.
func (n *node) OnAdd(ctx context.Context) { n.inited = true }

// lock takes the filesystem's lock, or fails with EIO after a crash.
func (n *node) lock() syscall.Errno {
	n.lfs.mu.Lock()
	if n.lfs.crashed {
		n.lfs.mu.Unlock()
		return syscall.EIO
	}
	return 0
}

func (n *node) unlock() { n.lfs.mu.Unlock() }

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	child := n.children[name]
	if child == nil {
		return nil, syscall.ENOENT
	}
	child.fill(&out.Attr)
	return n.inode(ctx, child), 0
}

func (n *node) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	n.fill(&out.Attr)
	return 0
}

func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	if size, ok := in.GetSize(); ok {
		if n.dir {
			return syscall.EISDIR
		}
		if size > 1<<40 {
			return syscall.EFBIG
		}
		n.truncate(int64(size))
	}
	if mode, ok := in.GetMode(); ok {
		n.perm = mode & 0o7777
		if n.parent != nil {
			n.lfs.log(metaOp{kind: "chmod", path: n.path(), perm: n.perm})
		}
	}
	if mtime, ok := in.GetMTime(); ok {
		n.mtime = mtime
	}
	n.fill(&out.Attr)
	return 0
}

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, 0, e
	}
	defer n.unlock()
	if n.dir {
		return nil, 0, syscall.EISDIR
	}
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		n.truncate(0)
	}
	return openHandle(flags), 0, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, nil, 0, e
	}
	defer n.unlock()
	if n.children[name] != nil {
		return nil, nil, 0, syscall.EEXIST
	}
	child := n.lfs.newNode(false, mode)
	n.attach(name, child)
	n.lfs.log(metaOp{kind: "create", path: child.path(), perm: child.perm})
	child.fill(&out.Attr)
	return n.inode(ctx, child), openHandle(flags), 0, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	if n.children[name] != nil {
		return nil, syscall.EEXIST
	}
	child := n.lfs.newNode(true, mode)
	n.attach(name, child)
	n.lfs.log(metaOp{kind: "mkdir", path: child.path(), perm: child.perm})
	child.fill(&out.Attr)
	return n.inode(ctx, child), 0
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
	child := n.children[name]
	switch {
	case child == nil:
		return syscall.ENOENT
	case dir && !child.dir:
		return syscall.ENOTDIR
	case !dir && child.dir:
		return syscall.EISDIR
	case dir && len(child.children) > 0:
		return syscall.ENOTEMPTY
	}
	kind := "unlink"
	if dir {
		kind = "rmdir"
	}
	n.lfs.log(metaOp{kind: kind, path: child.path()})
	n.detach(name)
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	to, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	const renameNoReplace = 1 // RENAME_NOREPLACE; RENAME_EXCHANGE is not supported
	if flags&^renameNoReplace != 0 {
		return syscall.EINVAL
	}
	child := n.children[name]
	if child == nil {
		return syscall.ENOENT
	}
	if to == n && name == newName {
		return 0
	}
	for p := to; p != nil; p = p.parent {
		if p == child {
			return syscall.EINVAL // into its own subtree
		}
	}
	if old := to.children[newName]; old != nil {
		switch {
		case flags&renameNoReplace != 0:
			return syscall.EEXIST
		case child.dir && !old.dir:
			return syscall.ENOTDIR
		case !child.dir && old.dir:
			return syscall.EISDIR
		case old.dir && len(old.children) > 0:
			return syscall.ENOTEMPTY
		}
	}
	from := child.path()
	n.detach(name)
	to.detach(newName)
	to.attach(newName, child)
	n.lfs.log(metaOp{kind: "rename", path: from, to: child.path()})
	return 0
}

func (n *node) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	var entries []fuse.DirEntry
	for _, name := range sortedNames(n.children) {
		c := n.children[name]
		entries = append(entries, fuse.DirEntry{Name: name, Ino: c.ino, Mode: c.stable().Mode})
	}
	return gofs.NewListDirStream(entries), 0
}

func (n *node) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	if off < 0 {
		return nil, syscall.EINVAL
	}
	if off >= int64(len(n.data)) {
		return fuse.ReadResultData(nil), 0
	}
	// Copied: the slice is read after the lock is released.
	k := copy(dest, n.data[off:])
	return fuse.ReadResultData(dest[:k]), 0
}

func (n *node) Write(ctx context.Context, fh gofs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return 0, e
	}
	defer n.unlock()
	end := off + int64(len(data))
	if off < 0 || end > 1<<40 {
		return 0, syscall.EFBIG
	}
	if end > int64(len(n.data)) {
		n.data = append(n.data, make([]byte, end-int64(len(n.data)))...)
	}
	copy(n.data[off:end], data)
	n.markWritten(off, end)
	n.mtime = time.Now()
	if h, ok := fh.(*handle); ok && h.sync {
		if e := n.lfs.commitLocked(); e != 0 {
			return 0, e
		}
		if e := n.lfs.syncDataLocked(n); e != 0 {
			return 0, e
		}
	}
	return uint32(len(data)), 0
}

// Fsync serves fsync and fdatasync of files and directories alike: both
// commit the namespace journal; a file's also makes its contents durable.
func (n *node) Fsync(ctx context.Context, fh gofs.FileHandle, flags uint32) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	if e := n.lfs.commitLocked(); e != 0 {
		return e
	}
	if n.dir {
		return 0
	}
	return n.lfs.syncDataLocked(n)
}

// Flush is close(2): it makes nothing durable.
func (n *node) Flush(ctx context.Context, fh gofs.FileHandle) syscall.Errno { return 0 }

// Statfs reports the backing filesystem's space: nats-server sizes its
// store limit from it.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.lfs.backing, &st); err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return errno
		}
		return syscall.EIO
	}
	out.FromStatfsT(&st)
	return 0
}

func sortedNames(m map[string]*node) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
