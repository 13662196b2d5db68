package lazyfs

import (
	"os"
	"testing"
)

// MountForTest mounts a lazyfs over backing at a fresh directory and
// unmounts it when the test ends. Where FUSE cannot mount (no /dev/fuse, no
// privilege), the test fails under CI=true, where a power-loss test that
// silently did not run would be a hole, and is skipped with the reason
// elsewhere.
func MountForTest(t testing.TB, backing string) *FS {
	t.Helper()
	mnt := t.TempDir()
	l, err := Mount(backing, mnt)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("lazyfs: FUSE must mount under CI=true: %v", err)
		}
		t.Skipf("lazyfs: FUSE cannot mount here (needs /dev/fuse and CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := l.Unmount(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return l
}
