package powerloss_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/lazyfs"
)

func TestMain(m *testing.M) { clickhousetest.RunMain(m) }

// soakEnv, set to 1 (scripts/soak.sh does), makes the tests long: more
// deliveries and several crashes in a row on the same store.
const soakEnv = "CRAWLHOUSE_POWERLOSS_SOAK"

// scenario is one power-loss run.
type scenario struct {
	layout      layout // of the receiver that crashes
	rounds      int    // crashes in a row on the same store
	deliveries  int    // deliveries offered per round
	concurrency int    // concurrent senders
}

// size is the short scenario, or the long one under soakEnv.
func size(sc scenario) scenario {
	sc.rounds, sc.deliveries, sc.concurrency = 1, 300, 16
	if os.Getenv(soakEnv) == "1" {
		sc.rounds, sc.deliveries, sc.concurrency = 5, 1500, 32
	}
	return sc
}

// round is what one crash did.
type round struct {
	acked      []string // webhookIds answered 2xx in this round
	statuses   map[string]int
	inStream   int      // messages in the stream after the crash
	missing    []string // of every delivery acknowledged so far, those not in the stream
	missingNow []string // of this round's, those not in the stream
	// missingPrior: of those acknowledged before the first crash (and
	// synced by a graceful stop), those not in the stream.
	missingPrior []string
	dropped      []string // what the crash discarded (lazyfs)
	syncs        map[string]int
}

// outcome is a whole run: its rounds, every webhookId acknowledged, and the
// receiver restarted on the store after the last crash, still running.
type outcome struct {
	rounds   []round
	acked    []string
	natsURL  string
	receiver *proc
	sinkBin  string
	prior    int // deliveries acknowledged before the first crash, by a receiver stopped gracefully
}

// powerLoss runs sc: per round, a receiver with its store on lazyfs takes
// signed deliveries from concurrent senders and, once three quarters of
// them are answered 2xx, is killed (SIGKILL) and its unsynced writes
// dropped; a receiver restarted on the bare store directory then tells what
// the stream holds.
func powerLoss(t *testing.T, sc scenario) *outcome {
	t.Helper()
	receiverBin, sinkBin := buildBinaries(t)
	store, logs := t.TempDir(), t.TempDir()
	crawlID := uuid.NewString()
	out := &outcome{sinkBin: sinkBin}

	// The stream exists, with deliveries in it, before the first crash: a
	// receiver on the bare directory takes a few and stops gracefully. What
	// the power loss then takes is recent deliveries, not the whole store.
	{
		port, natsPort := freePort(t), freePort(t)
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		p := startProc(t, "receiver-before", receiverBin, logs, base, receiverEnv(store, port, natsPort, layout{syncAlways: true, wal: sc.layout.wal}))
		ds := makeDeliveries(t, crawlID, "before", 20)
		s := sendAndCrash(base+"/webhooks/crawl", ds, 4, -1, nil)
		p.stop()
		if len(s.acked) != len(ds) {
			t.Fatalf("before the crashes: %d of %d deliveries answered 2xx (%v); receiver log:\n%s", len(s.acked), len(ds), s.statuses, p.tail())
		}
		out.prior = len(s.acked)
		out.acked = append(out.acked, s.acked...)
	}

	for r := 1; r <= sc.rounds; r++ {
		l := lazyfs.MountForTest(t, store)
		port, natsPort := freePort(t), freePort(t)
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		rcv := startProc(t, fmt.Sprintf("receiver-round%d", r), receiverBin, logs, base,
			receiverEnv(l.Mountpoint(), port, natsPort, sc.layout))

		ds := makeDeliveries(t, crawlID, fmt.Sprint(r), sc.deliveries)
		killAfter := sc.deliveries * 3 / 4
		var dropped []string
		s := sendAndCrash(base+"/webhooks/crawl", ds, sc.concurrency, killAfter, func() {
			// The power goes: the process and the page cache at once.
			rcv.kill()
			dropped = l.Crash()
		})
		if len(s.acked) < killAfter {
			rcv.kill()
			t.Fatalf("round %d: only %d of %d deliveries answered 2xx, the crash was to come after %d (statuses %v); receiver log:\n%s",
				r, len(s.acked), len(ds), killAfter, s.statuses, rcv.tail())
		}
		syncs := l.Syncs()
		if err := l.Unmount(); err != nil {
			t.Fatal(err)
		}
		if err := l.Err(); err != nil {
			t.Fatalf("round %d: lazyfs: %v", r, err)
		}
		out.acked = append(out.acked, s.acked...)

		// After the power loss: the same store, no page cache. With the
		// write-ahead log, this receiver replays it into the stream before
		// it says it is ready, as any restart does.
		vport, vnats := freePort(t), freePort(t)
		out.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", vnats)
		v := startProc(t, fmt.Sprintf("receiver-after-round%d", r), receiverBin, logs,
			fmt.Sprintf("http://127.0.0.1:%d", vport), receiverEnv(store, vport, vnats, layout{syncAlways: true, wal: sc.layout.wal}))
		ids := streamIDs(t, out.natsURL)
		rd := round{
			acked: s.acked, statuses: s.statuses, inStream: len(ids),
			missing: missingFrom(out.acked, ids), missingNow: missingFrom(s.acked, ids),
			missingPrior: missingFrom(out.acked[:out.prior], ids),
			dropped:      dropped, syncs: syncs,
		}
		out.rounds = append(out.rounds, rd)
		t.Logf("round %d (%s): %d of %d deliveries acknowledged before the crash (%v); stream holds %d; acknowledged and missing: %d of this round, %d of %d overall",
			r, sc.layout, len(s.acked), len(ds), s.statuses, len(ids), len(rd.missingNow), len(rd.missing), len(out.acked))
		t.Logf("round %d: the crash dropped %d unsynced changes: %q", r, len(dropped), first(dropped, 12))
		t.Logf("round %d: fsyncs that made changes durable, per file: %s", r, syncSummary(syncs))
		if r < sc.rounds {
			v.stop()
		} else {
			out.receiver = v
		}
	}
	return out
}

// TestAcknowledgedDeliveriesSurvivePowerLoss: in the durable fast layout
// (`make run`: RECEIVER_WAL_DIR set, NATS_SYNC_ALWAYS=false), every delivery
// answered 2xx before the power loss is in the stream afterwards (the
// restarted receiver replays the write-ahead log), and the sink archives
// every one of them into ClickHouse.
func TestAcknowledgedDeliveriesSurvivePowerLoss(t *testing.T) {
	run := powerLoss(t, size(scenario{layout: layout{wal: true}}))
	assertNoneMissing(t, run)

	addr, db := clickhousetest.NewDatabase(t)
	conn := clickhousetest.Open(t, db)
	sinkPort := freePort(t)
	env := chEnv(addr, db)
	env["NATS_URL"] = run.natsURL
	env["SINK_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", sinkPort)
	env["SINK_BATCH_WAIT"] = "100ms"
	sink := startProc(t, "sink", run.sinkBin, t.TempDir(), fmt.Sprintf("http://127.0.0.1:%d", sinkPort), env)

	var missing []string
	deadline := time.Now().Add(3 * time.Minute)
	for {
		have, err := archivedIDs(conn)
		if err == nil {
			if missing = missingFrom(run.acked, have); len(missing) == 0 {
				t.Logf("pages (FINAL) holds all %d acknowledged pages (%d rows)", len(run.acked), len(have))
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pages (FINAL) lacks %d of %d acknowledged pages: %v (last error %v); sink log:\n%s",
				len(missing), len(run.acked), first(missing, 10), err, sink.tail())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestSyncAlwaysSurvivesPowerLoss: the binary's defaults without the log
// (NATS_SYNC_ALWAYS=true, RECEIVER_GROUP_COMMIT=auto) keep every
// acknowledged delivery too.
func TestSyncAlwaysSurvivesPowerLoss(t *testing.T) {
	run := powerLoss(t, size(scenario{layout: layout{syncAlways: true}}))
	assertNoneMissing(t, run)
}

func assertNoneMissing(t *testing.T, run *outcome) {
	t.Helper()
	for i, rd := range run.rounds {
		if len(rd.missing) > 0 {
			t.Errorf("round %d: %d of %d acknowledged deliveries are not in the stream after the power loss: %v\nthe crash dropped: %q",
				i+1, len(rd.missing), len(run.acked), first(rd.missing, 10), first(rd.dropped, 30))
		}
	}
}

// TestLazySyncLosesAcknowledgedDeliveries proves the tests above can fail:
// a server that syncs lazily (NATS_SYNC_ALWAYS=false) without the
// write-ahead log answers 2xx for deliveries still in the page cache, and
// the power loss must take some of them. Each round must find at least one
// acknowledged delivery missing. The server syncs at nats-server's own
// default, every two minutes: with NATS_SYNC_INTERVAL at 250 ms (its
// default then), a crash just after a sync left as few as 5 of 1 133 missing,
// and one right after it would leave none, failing this test for nothing.
func TestLazySyncLosesAcknowledgedDeliveries(t *testing.T) {
	run := powerLoss(t, size(scenario{layout: layout{syncEvery: 2 * time.Minute}}))
	for i, rd := range run.rounds {
		if len(rd.missingPrior) > 0 {
			t.Errorf("round %d: %d of the %d deliveries stored before the crashes, by a receiver stopped gracefully, are missing: %v",
				i+1, len(rd.missingPrior), run.prior, first(rd.missingPrior, 10))
		}
		if len(rd.missingNow) == 0 {
			t.Errorf("round %d: a server that syncs lazily lost none of the %d deliveries it acknowledged: this test cannot detect loss (the crash dropped %q)",
				i+1, len(rd.acked), first(rd.dropped, 30))
		}
	}
}

// archivedIDs is the set of webhook ids in the pages table, deduplicated
// as readers see it.
func archivedIDs(conn driver.Conn) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := conn.Query(ctx, "SELECT toString(webhook_id) FROM pages FINAL")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		have[id] = true
	}
	return have, rows.Err()
}

func syncSummary(syncs map[string]int) string {
	paths := make([]string, 0, len(syncs))
	for p := range syncs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	s := ""
	for _, p := range paths {
		s += fmt.Sprintf("\n\t%6d %s", syncs[p], p)
	}
	if s == "" {
		return "none"
	}
	return s
}
