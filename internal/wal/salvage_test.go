package wal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
)

// writeLog appends n entries of about 4 KiB to a new log in dir, one
// synced commit each, and closes it; it returns the log's one WAL file.
func writeLog(t *testing.T, dir string, n int) string {
	t.Helper()
	w := open(t, dir, nil)
	for i := range n {
		env := envelope(i)
		env.Body = append(env.Body, strings.Repeat(" ", 4000)...)
		if err := w.Append(env); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := walFiles(dir)
	if err != nil || len(files) == 0 {
		t.Fatalf("WAL files in %s: %v, %v", dir, files, err)
	}
	return filepath.Join(dir, files[len(files)-1].name)
}

// TestDamagedLogIsSalvaged: one byte flipped in the middle of the log's
// WAL file loses at most the entries of the blocks it touches; every entry
// after it is replayed, the damage is counted and logged at error level
// with the file and offset, and the damaged file is kept aside.
func TestDamagedLogIsSalvaged(t *testing.T) {
	dir := t.TempDir()
	path := writeLog(t, dir, 60) // about 8 blocks of 32 KiB
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(3*blockSize + 1000)
	b[at] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}

	var logged strings.Builder
	reg := prometheus.NewRegistry()
	w, err := Open(Options{Dir: dir, MaxBytes: 64 << 20, Registerer: reg, Logger: zerolog.New(&logged)})
	if err != nil {
		t.Fatalf("Open of a damaged log: %v", err)
	}
	defer w.Close()
	got := replayAll(t, w)
	seen := map[string]bool{}
	for _, id := range got {
		seen[id] = true
	}
	// An entry is about 4 KiB: the damaged block's own and the one
	// running into it may be lost, no more.
	if lost := 60 - len(got); lost < 1 || lost > blockSize/4000+2 {
		t.Errorf("replayed %d of 60 entries, want all but the few in the damaged block", len(got))
	}
	for _, id := range []string{"id-0", "id-20", "id-40", "id-59"} {
		if !seen[id] {
			t.Errorf("%s, far from the damage, not replayed (replayed %d)", id, len(got))
		}
	}
	if v := testutil.ToFloat64(w.m.damaged); v != 1 {
		t.Errorf("crawlhouse_receiver_wal_damaged_total = %v, want 1", v)
	}
	line := logged.String()
	name := filepath.Base(path)
	if !strings.Contains(line, `"level":"error"`) || !strings.Contains(line, name) || !strings.Contains(line, `"offset":`) {
		t.Errorf("the damage was not logged at error level with its file %s and offset: %s", name, line)
	}
	if _, err := os.Stat(filepath.Join(dir, damagedDir, name)); err != nil {
		t.Errorf("the damaged file is not kept aside: %v", err)
	}
}

// TestTornTailIsNoDamage: a log cut short in its last record, as a crash
// mid-write leaves it, replays every whole entry and reports nothing.
func TestTornTailIsNoDamage(t *testing.T) {
	dir := t.TempDir()
	path := writeLog(t, dir, 20)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Through the middle of the last entry (the clean close wrote a short
	// trailer after it).
	if err := os.Truncate(path, fi.Size()-2500); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	w, err := Open(Options{Dir: dir, MaxBytes: 64 << 20, Logger: zerolog.New(&logged)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := replayAll(t, w); len(got) != 19 || got[18] != "id-18" {
		t.Errorf("replayed %d entries, want the 19 whole ones", len(got))
	}
	if v := testutil.ToFloat64(w.m.damaged); v != 0 || strings.Contains(logged.String(), "damaged") {
		t.Errorf("a torn tail reported as damage (%v): %s", v, logged.String())
	}
}
