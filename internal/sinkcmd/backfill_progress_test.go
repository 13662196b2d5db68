package sinkcmd

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/rs/zerolog"
)

// TestBackfillProgress: the backfill's page store, asked about each chunk it
// read, logs a progress line every backfillProgressEvery chunks with the
// chunks and URLs read so far, and answers as the archive does.
func TestBackfillProgress(t *testing.T) {
	t.Parallel()
	addr, db := clickhousetest.NewDatabase(t)
	cfg := archive.Config{Addr: addr, Database: db, User: "default"}
	conn, err := archive.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx := context.Background()
	if _, err := schema.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	w, err := archive.NewStore(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	p := &progressStore{Store: w, log: zerolog.New(&logged), every: 3}
	const job = "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c"
	for range 7 {
		have, err := p.ExistingURLs(ctx, job, []string{"https://a.example/1", "https://a.example/2"})
		if err != nil {
			t.Fatal(err)
		}
		if len(have) != 0 {
			t.Fatalf("an empty archive has %v", have)
		}
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	want := []string{`"chunks_read":3,"urls_read":6`, `"chunks_read":6,"urls_read":12`}
	if len(lines) != len(want) {
		t.Fatalf("progress lines:\n%s\nwant %d", logged.String(), len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) || !strings.Contains(lines[i], `"message":"backfill progress"`) || !strings.Contains(lines[i], job) {
			t.Errorf("line %d %s, want %s", i+1, lines[i], w)
		}
	}
}
