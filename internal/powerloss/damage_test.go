package powerloss_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	envelope "github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/wal"
)

// TestDamagedLogReplaysEveryIntactEntry: a receiver left 60 acknowledged
// deliveries in its write-ahead log; one byte in the middle of the log's
// file was then flipped on disk. The receiver binary started on it
// replays every entry outside the damaged block (not only those before
// it), logs the damage at error level with the file and offset, and
// counts it in crawlhouse_receiver_wal_damaged_total.
func TestDamagedLogReplaysEveryIntactEntry(t *testing.T) {
	receiverBin, _ := buildBinaries(t)
	root, logs := t.TempDir(), t.TempDir()
	walDir := filepath.Join(root, "wal")
	ds := makeDeliveries(t, uuid.NewString(), "damaged", 60)
	w, err := wal.Open(wal.Options{Dir: walDir, MaxBytes: 64 << 20, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		env := &envelope.Envelope{Subject: subjects + "crawl.page", WebhookID: d.webhookID, CrawlID: "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c",
			Type: "crawl.page", ReceivedAt: time.Now().UTC(), Size: len(d.body), Body: d.body}
		if err := w.Append(env); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	logs2, _ := filepath.Glob(filepath.Join(walDir, "*.log"))
	var path string
	var size int64
	for _, p := range logs2 {
		if fi, err := os.Stat(p); err == nil && fi.Size() > size {
			path, size = p, fi.Size()
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}

	port, natsPort := freePort(t), freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	rcv := startProc(t, "receiver-damaged", receiverBin, logs, base, receiverEnv(root, port, natsPort, layout{syncAlways: true, wal: true}))
	ids := streamIDs(t, fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	var acked []string
	for _, d := range ds {
		acked = append(acked, d.webhookID)
	}
	missing := missingFrom(acked, ids)
	// A delivery is about 3.5 KB: a 32 KiB block holds ten, and one more
	// may run into it.
	if len(missing) == 0 || len(missing) > 12 || !ids[ds[0].webhookID] || !ids[ds[59].webhookID] {
		t.Errorf("after a flipped byte mid-log, %d of 60 entries are missing from the stream (first %v, last %v), want the few of one block",
			len(missing), ids[ds[0].webhookID], ids[ds[59].webhookID])
	}
	waitMetric(t, base, "crawlhouse_receiver_wal_damaged_total 1", rcv)
	rcv.stop()
	log := rcv.tail()
	found := false
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"level":"error"`) && strings.Contains(line, filepath.Base(path)) && strings.Contains(line, `"offset":`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no error line names %s and an offset:\n%s", filepath.Base(path), log)
	}
	t.Logf("%d of 60 entries lost to the damage", len(missing))
}
