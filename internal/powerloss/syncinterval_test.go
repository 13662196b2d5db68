package powerloss_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/crawlhouse/crawlhouse/internal/testkit/lazyfs"
)

// TestLogOutlivesAHeldBackSync: the write-ahead log drops an entry only
// once the stream's copy is durable, and it makes it so itself (the
// receiver fsyncs the embedded server's store before it trims): with the
// server's own sync held back for an hour, far past anything a timed
// retention would have waited, every delivery answered 2xx and already
// trimmed from the log survives a power loss.
func TestLogOutlivesAHeldBackSync(t *testing.T) {
	receiverBin, _ := buildBinaries(t)
	store, logs := t.TempDir(), t.TempDir()
	held := layout{wal: true, syncEvery: time.Hour}
	l := lazyfs.MountForTest(t, store)
	port, natsPort := freePort(t), freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	rcv := startProc(t, "receiver-held", receiverBin, logs, base, receiverEnv(l.Mountpoint(), port, natsPort, held))

	ds := makeDeliveries(t, uuid.NewString(), "held", 200)
	s := sendAndCrash(base+"/webhooks/crawl", ds, 8, -1, nil)
	if len(s.acked) != len(ds) {
		rcv.kill()
		t.Fatalf("%d of %d deliveries answered 2xx (%v); receiver log:\n%s", len(s.acked), len(ds), s.statuses, rcv.tail())
	}
	// Nothing is sent any more: wait until the log has let every entry go.
	waitMetric(t, base, "crawlhouse_receiver_wal_pending_entries 0", rcv)
	syncs := l.Syncs()
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
		t.Errorf("%d of %d acknowledged deliveries, trimmed from the log while the server's sync was held back, are missing after a power loss: %v\nthe crash dropped: %q",
			len(missing), len(s.acked), first(missing, 10), first(dropped, 30))
		t.Logf("fsyncs that found changes, by file: %v\nreceiver log:\n%s", syncs, rcv.tail())
	}
	t.Logf("%d deliveries acknowledged, %d in the stream after the power loss; the crash dropped %d unsynced changes: %q",
		len(s.acked), len(ids), len(dropped), first(dropped, 12))
}

// waitMetric polls base/metrics until a line equals want (the process
// failing or two minutes passing fail the test).
func waitMetric(t *testing.T, base, want string, p *proc) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(b)
			for _, line := range strings.Split(last, "\n") {
				if line == want {
					return
				}
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited:\n%s", p.name, p.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("/metrics never said %q; last:\n%s", want, grepLines(last, strings.Fields(want)[0]))
}

func grepLines(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
