package lazyfs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/testkit/lazyfs"
)

// setup mounts a lazyfs over a fresh backing directory.
func setup(t *testing.T) (l *lazyfs.FS, mnt, backing string) {
	t.Helper()
	backing = t.TempDir()
	l = lazyfs.MountForTest(t, backing)
	return l, l.Mountpoint(), backing
}

// crash simulates the power loss and unmounts, leaving the backing
// directory as a machine would find it.
func crash(t *testing.T, l *lazyfs.FS) {
	t.Helper()
	l.Crash()
	if err := l.Unmount(); err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lazyfs failed to apply a durable change: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path string, data string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(t, err)
	_, err = f.WriteString(data)
	must(t, err)
	if sync {
		must(t, f.Sync())
	}
	must(t, f.Close())
}

func fsyncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	must(t, err)
	must(t, d.Sync())
	must(t, d.Close())
}

func content(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return string(b)
}

func absent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: want absent after the crash, stat says %v", path, err)
	}
}

func TestSyncedDataSurvivesUnsyncedDoesNot(t *testing.T) {
	l, mnt, backing := setup(t)
	f, err := os.Create(filepath.Join(mnt, "a.blk"))
	must(t, err)
	_, err = f.Write([]byte("synced|"))
	must(t, err)
	must(t, f.Sync())
	_, err = f.Write([]byte("unsynced"))
	must(t, err)
	// Overwrite inside the synced part, not synced either.
	_, err = f.WriteAt([]byte("S"), 0)
	must(t, err)
	must(t, f.Close())

	// The mount reads like a page cache: everything written is there.
	if got := content(t, filepath.Join(mnt, "a.blk")); got != "Synced|unsynced" {
		t.Fatalf("read through the mount = %q, want the unsynced writes too", got)
	}
	// The backing directory already holds only the durable state.
	if got := content(t, filepath.Join(backing, "a.blk")); got != "synced|" {
		t.Fatalf("backing before the crash = %q, want %q", got, "synced|")
	}
	if p := l.Pending(); !slices.Contains(p, "data a.blk (15 bytes in the page cache)") {
		t.Errorf("Pending = %q, want the unsynced contents of a.blk", p)
	}
	crash(t, l)
	if got := content(t, filepath.Join(backing, "a.blk")); got != "synced|" {
		t.Errorf("after the crash a.blk = %q, want %q", got, "synced|")
	}
}

func TestFdatasyncMakesWritesAtOffsetsDurable(t *testing.T) {
	l, mnt, backing := setup(t)
	f, err := os.Create(filepath.Join(mnt, "b"))
	must(t, err)
	_, err = f.WriteAt([]byte("xyz"), 10) // a hole of 10 zero bytes first
	must(t, err)
	_, err = f.WriteAt([]byte("ab"), 2)
	must(t, err)
	must(t, syscall.Fdatasync(int(f.Fd())))
	must(t, f.Close())
	crash(t, l)
	want := []byte("\x00\x00ab\x00\x00\x00\x00\x00\x00xyz")
	if got := []byte(content(t, filepath.Join(backing, "b"))); !bytes.Equal(got, want) {
		t.Errorf("after the crash b = %q, want %q", got, want)
	}
}

func TestCreateWithoutAnyFsyncIsLost(t *testing.T) {
	l, mnt, backing := setup(t)
	must(t, os.Mkdir(filepath.Join(mnt, "d"), 0o755))
	write(t, filepath.Join(mnt, "d", "new"), "data", false)
	crash(t, l)
	absent(t, filepath.Join(backing, "d"))
}

// The namespace journal: a create is durable once anything is fsynced after
// it, its contents only by an fsync of the file itself.
func TestCreateIsDurableAtTheNextFsyncOfAnything(t *testing.T) {
	l, mnt, backing := setup(t)
	must(t, os.Mkdir(filepath.Join(mnt, "d"), 0o755))
	write(t, filepath.Join(mnt, "d", "unsynced"), "data", false)
	write(t, filepath.Join(mnt, "other"), "x", true)
	write(t, filepath.Join(mnt, "d", "after"), "later", false)
	crash(t, l)
	if got := content(t, filepath.Join(backing, "d", "unsynced")); got != "" {
		t.Errorf("d/unsynced = %q, want the empty file its journaled create left", got)
	}
	if got := content(t, filepath.Join(backing, "other")); got != "x" {
		t.Errorf("other = %q, want %q", got, "x")
	}
	absent(t, filepath.Join(backing, "d", "after"))
}

// A write-to-temporary-then-rename, as nats-server writes its meta files:
// the rename is durable only when something is fsynced after it.
func TestRenameFollowsTheJournal(t *testing.T) {
	l, mnt, backing := setup(t)
	write(t, filepath.Join(mnt, "meta.inf"), "v1", true)
	write(t, filepath.Join(mnt, "meta.inf.tmp"), "v2", true)
	must(t, os.Rename(filepath.Join(mnt, "meta.inf.tmp"), filepath.Join(mnt, "meta.inf")))
	if got := content(t, filepath.Join(mnt, "meta.inf")); got != "v2" {
		t.Fatalf("meta.inf through the mount = %q, want v2", got)
	}
	crash(t, l)
	if got := content(t, filepath.Join(backing, "meta.inf")); got != "v1" {
		t.Errorf("meta.inf = %q, want v1: the rename was never synced", got)
	}
	if got := content(t, filepath.Join(backing, "meta.inf.tmp")); got != "v2" {
		t.Errorf("meta.inf.tmp = %q, want v2", got)
	}
}

func TestRenameThenDirectoryFsyncIsDurable(t *testing.T) {
	l, mnt, backing := setup(t)
	must(t, os.MkdirAll(filepath.Join(mnt, "s", "msgs"), 0o755))
	write(t, filepath.Join(mnt, "s", "msgs", "1.blk"), "block", true)
	must(t, os.Rename(filepath.Join(mnt, "s"), filepath.Join(mnt, "t")))
	fsyncDir(t, mnt)
	write(t, filepath.Join(mnt, "t", "msgs", "1.blk"), "+more", true)
	crash(t, l)
	absent(t, filepath.Join(backing, "s"))
	if got := content(t, filepath.Join(backing, "t", "msgs", "1.blk")); got != "block+more" {
		t.Errorf("t/msgs/1.blk = %q, want %q", got, "block+more")
	}
}

// Data written but never synced into a file renamed and synced in place:
// the rename is durable, the contents are not (ext4 without auto_da_alloc).
func TestRenameDoesNotMakeDataDurable(t *testing.T) {
	l, mnt, backing := setup(t)
	write(t, filepath.Join(mnt, "f.tmp"), "never synced", false)
	must(t, os.Rename(filepath.Join(mnt, "f.tmp"), filepath.Join(mnt, "f")))
	fsyncDir(t, mnt)
	crash(t, l)
	if got := content(t, filepath.Join(backing, "f")); got != "" {
		t.Errorf("f = %q, want empty", got)
	}
}

func TestUnlinkAndRmdirFollowTheJournal(t *testing.T) {
	l, mnt, backing := setup(t)
	must(t, os.Mkdir(filepath.Join(mnt, "d"), 0o755))
	write(t, filepath.Join(mnt, "d", "gone"), "1", true)
	write(t, filepath.Join(mnt, "kept"), "2", true)
	must(t, os.Remove(filepath.Join(mnt, "d", "gone")))
	must(t, os.Remove(filepath.Join(mnt, "d")))
	fsyncDir(t, mnt)
	must(t, os.Remove(filepath.Join(mnt, "kept")))
	absent(t, filepath.Join(mnt, "kept"))
	crash(t, l)
	absent(t, filepath.Join(backing, "d"))
	if got := content(t, filepath.Join(backing, "kept")); got != "2" {
		t.Errorf("kept = %q, want it back: its unlink was never synced", got)
	}
}

func TestTruncateIsDataUntilFsynced(t *testing.T) {
	l, mnt, backing := setup(t)
	write(t, filepath.Join(mnt, "cut"), "0123456789", true)
	write(t, filepath.Join(mnt, "cutsync"), "0123456789", true)
	must(t, os.Truncate(filepath.Join(mnt, "cut"), 3))
	// Cut then grown back: the grown part must read as zeros, durably.
	must(t, os.Truncate(filepath.Join(mnt, "cutsync"), 2))
	must(t, os.Truncate(filepath.Join(mnt, "cutsync"), 5))
	f, err := os.OpenFile(filepath.Join(mnt, "cutsync"), os.O_RDWR, 0)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
	crash(t, l)
	if got := content(t, filepath.Join(backing, "cut")); got != "0123456789" {
		t.Errorf("cut = %q, want the synced contents back", got)
	}
	if got := content(t, filepath.Join(backing, "cutsync")); got != "01\x00\x00\x00" {
		t.Errorf("cutsync = %q, want %q", got, "01\x00\x00\x00")
	}
}

func TestOpenWithOTruncIsDataUntilFsynced(t *testing.T) {
	l, mnt, backing := setup(t)
	write(t, filepath.Join(mnt, "f"), "old", true)
	f, err := os.OpenFile(filepath.Join(mnt, "f"), os.O_WRONLY|os.O_TRUNC, 0)
	must(t, err)
	must(t, f.Close())
	if got := content(t, filepath.Join(mnt, "f")); got != "" {
		t.Fatalf("f through the mount = %q, want empty", got)
	}
	crash(t, l)
	if got := content(t, filepath.Join(backing, "f")); got != "old" {
		t.Errorf("f = %q, want %q", got, "old")
	}
}

func TestOSyncWritesAreDurableWithoutFsync(t *testing.T) {
	l, mnt, backing := setup(t)
	f, err := os.OpenFile(filepath.Join(mnt, "s"), os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o644)
	must(t, err)
	_, err = f.Write([]byte("durable"))
	must(t, err)
	must(t, f.Close())
	crash(t, l)
	if got := content(t, filepath.Join(backing, "s")); got != "durable" {
		t.Errorf("s = %q, want %q", got, "durable")
	}
}

func TestExistingContentsAreServedAndKept(t *testing.T) {
	backing := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(backing, "jetstream", "msgs"), 0o750))
	must(t, os.WriteFile(filepath.Join(backing, "jetstream", "msgs", "1.blk"), []byte("old"), 0o640))
	l := lazyfs.MountForTest(t, backing)
	mnt := l.Mountpoint()
	entries, err := os.ReadDir(filepath.Join(mnt, "jetstream", "msgs"))
	must(t, err)
	if len(entries) != 1 || entries[0].Name() != "1.blk" {
		t.Fatalf("readdir = %v, want [1.blk]", entries)
	}
	info, err := os.Stat(filepath.Join(mnt, "jetstream", "msgs", "1.blk"))
	must(t, err)
	if info.Size() != 3 || info.Mode().Perm() != 0o640 {
		t.Errorf("stat = size %d mode %v, want size 3 mode -rw-r-----", info.Size(), info.Mode())
	}
	write(t, filepath.Join(mnt, "jetstream", "msgs", "1.blk"), "+new", false)
	if got := content(t, filepath.Join(mnt, "jetstream", "msgs", "1.blk")); got != "old+new" {
		t.Errorf("read through the mount = %q, want %q", got, "old+new")
	}
	crash(t, l)
	if got := content(t, filepath.Join(backing, "jetstream", "msgs", "1.blk")); got != "old" {
		t.Errorf("after the crash = %q, want %q", got, "old")
	}
}

func TestAfterTheCrashTheMountFails(t *testing.T) {
	l, mnt, _ := setup(t)
	write(t, filepath.Join(mnt, "f"), "x", true)
	f, err := os.OpenFile(filepath.Join(mnt, "f"), os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	l.Crash()
	if _, err := f.Write([]byte("y")); !errors.Is(err, syscall.EIO) {
		t.Errorf("write after the crash: %v, want EIO", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("fsync after the crash: %v, want EIO", err)
	}
}
