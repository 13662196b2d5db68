package powerloss_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/crawlhouse/crawlhouse/internal/testkit/lazyfs"
)

// TestLazyServerSyncsWithinItsInterval holds nats-server to what the
// write-ahead log's trimming relies on: a lazily syncing server
// (NATS_SYNC_ALWAYS=false, NATS_SYNC_INTERVAL) has everything it
// acknowledged on stable storage once its sync interval has passed. The
// log drops an entry RECEIVER_WAL_RETENTION (at least four intervals)
// after its delivery was answered; should a nats-server release sync later
// than its interval, or not at all, this test finds the deliveries missing
// after a power loss that comes a few intervals after the last of them.
func TestLazyServerSyncsWithinItsInterval(t *testing.T) {
	receiverBin, _ := buildBinaries(t)
	store, logs := t.TempDir(), t.TempDir()
	lazy := layout{}
	l := lazyfs.MountForTest(t, store)
	port, natsPort := freePort(t), freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	rcv := startProc(t, "receiver-lazy", receiverBin, logs, base, receiverEnv(l.Mountpoint(), port, natsPort, lazy))

	ds := makeDeliveries(t, uuid.NewString(), "interval", 200)
	s := sendAndCrash(base+"/webhooks/crawl", ds, 8, -1, nil)
	if len(s.acked) != len(ds) {
		rcv.kill()
		t.Fatalf("%d of %d deliveries answered 2xx (%v); receiver log:\n%s", len(s.acked), len(ds), s.statuses, rcv.tail())
	}
	// Nothing is sent any more: after four sync intervals, the least
	// RECEIVER_WAL_RETENTION the receiver accepts, the server has synced
	// everything it acknowledged.
	time.Sleep(4 * syncInterval)
	rcv.kill()
	dropped := l.Crash()
	if err := l.Unmount(); err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lazyfs: %v", err)
	}

	vport, vnats := freePort(t), freePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", vnats)
	startProc(t, "receiver-after", receiverBin, logs, fmt.Sprintf("http://127.0.0.1:%d", vport),
		receiverEnv(store, vport, vnats, layout{syncAlways: true}))
	ids := streamIDs(t, natsURL)
	if missing := missingFrom(s.acked, ids); len(missing) > 0 {
		t.Errorf("%d of %d deliveries acknowledged by a server syncing every %s are missing after a power loss %s after the last: %v\nthe crash dropped: %q",
			len(missing), len(s.acked), syncInterval, 4*syncInterval, first(missing, 10), first(dropped, 30))
	}
	t.Logf("%d deliveries acknowledged, %d in the stream after the power loss; the crash dropped %d unsynced changes: %q",
		len(s.acked), len(ids), len(dropped), first(dropped, 12))
}
