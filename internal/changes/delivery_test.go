package changes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/changes"
	"github.com/crawlhouse/crawlhouse/internal/changes/summary"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// startNATS runs a real JetStream server whose max_payload is maxPayload,
// for the test's life, and returns its client URL.
func startNATS(t *testing.T, maxPayload int32) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		MaxPayload: maxPayload, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.ClientURL()
}

// archivePages archives one delivery of job crawlID holding a page per URL
// (its markdown and status code), and the job's completion, its backfill
// done.
func (wd *world) archivePages(t *testing.T, crawlID string, urls []string, markdown string, status int, at time.Time) {
	t.Helper()
	docs := make([]string, len(urls))
	for i, u := range urls {
		doc, err := json.Marshal(map[string]any{"markdown": markdown, "metadata": map[string]any{"url": u, "statusCode": status}})
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = string(doc)
	}
	for _, body := range []string{
		fmt.Sprintf(`{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[%s],"metadata":{"scope":"docs","limit":"1000"}}`,
			crawlID, uuid.NewString(), strings.Join(docs, ",")),
		fmt.Sprintf(`{"success":true,"type":"crawl.completed","id":%q,"webhookId":%q,"data":[],"metadata":{"scope":"docs","limit":"1000"}}`, crawlID, uuid.NewString()),
	} {
		wd.insert(t, body, at)
	}
	if err := wd.w.SetBackfillState(context.Background(), crawlID, "done", "kind=crawl api_status=completed"); err != nil {
		t.Fatal(err)
	}
}

// longURLs returns 100 URLs of 6 KB in URL order, of what JSON escapes
// (<, >, &) and multi-byte runes.
func longURLs(prefix string) []string {
	urls := make([]string, 100)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://docs.test/%s/%03d/%s", prefix, i, strings.Repeat("<é&>", 1190))
	}
	return urls
}

// TestLargeSummaryArrives: the job, 100 changed and 100 removed
// URLs of 6 KB, on a server whose max_payload is 64 KiB (the default
// 1 MiB is TestSummaryBound's), arrives on crawl.changes and at the
// webhook within the server's bound, with its exact counts, its lists cut
// and saying so.
func TestLargeSummaryArrives(t *testing.T) {
	t.Parallel()
	const maxPayload = 64 << 10
	wd := newWorldOn(t, startNATS(t, maxPayload))
	changed, removed := longURLs("changed"), longURLs("removed")
	now := time.Now().UTC()
	all := append(append([]string{}, changed...), removed...)
	wd.archivePages(t, first, all, "page", 200, now.Add(-time.Hour))
	wd.archivePages(t, second, changed, "page, edited", 200, now)
	wd.archivePages(t, second, removed, "Not found", 404, now)

	var sizes []int
	var mu sync.Mutex
	sub, err := wd.nc.Subscribe(changes.Subject, func(m *nats.Msg) {
		if strings.Contains(string(m.Data), second) {
			mu.Lock()
			sizes = append(sizes, len(m.Data))
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := wd.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	r, _ := wd.replica(t, changes.Config{MaxURLs: 10000}, changes.Options{Backfill: true})
	r.Ended(second)
	wd.waitSent(t, second)
	published, posted := wd.sent(second)
	if len(published) != 1 || len(posted) != 1 {
		t.Fatalf("%d summaries published and %d posted, want one each", len(published), len(posted))
	}
	for _, got := range []summary.Job{published[0], posted[0]} {
		if got.Changed != 100 || got.Removed != 100 || got.New != 0 || got.Same != 0 {
			t.Errorf("counts changed %d removed %d new %d same %d, want 100 changed and 100 removed", got.Changed, got.Removed, got.New, got.Same)
		}
		if !got.Truncated || len(got.ChangedURLs) == 0 || len(got.RemovedURLs) == 0 || len(got.ChangedURLs)+len(got.RemovedURLs) >= 200 ||
			got.ChangedURLsOmitted != 100-uint64(len(got.ChangedURLs)) || got.RemovedURLsOmitted != 100-uint64(len(got.RemovedURLs)) {
			t.Errorf("lists of %d and %d URLs, omitted %d and %d, truncated %v: want both cut to fit, and said",
				len(got.ChangedURLs), len(got.RemovedURLs), got.ChangedURLsOmitted, got.RemovedURLsOmitted, got.Truncated)
		}
		if got.ChangedURLs[0] != changed[0] || got.RemovedURLs[0] != removed[0] {
			t.Errorf("the lists do not start with the first URLs of their class")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 1 || sizes[0] > maxPayload {
		t.Errorf("messages of %v bytes on %s, want one within %d", sizes, changes.Subject, maxPayload)
	}
}

// claimState reads the job's claim as the bucket holds it.
func (wd *world) claimState(t *testing.T, crawlID string) (state string, delivered []string) {
	t.Helper()
	kv, err := wd.js.KeyValue(context.Background(), stream.ChangeClaimsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), crawlID)
	if err != nil {
		return "", nil
	}
	var v struct {
		State     string   `json:"state"`
		Delivered []string `json:"delivered"`
	}
	_ = json.Unmarshal(e.Value(), &v)
	return v.State, v.Delivered
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSummaryPublishFailsAfterClaim: the job is claimed, then its publish
// fails (the sink's NATS connection is cut) while its POST succeeds. The
// claim is released with the webhook marked delivered, and the summary is
// published once NATS is back: by the same replica when it comes back to
// it, or by another replica whose NATS works; either way exactly one
// summary on each destination.
func TestSummaryPublishFailsAfterClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// other: a second replica, with a working connection, is told of
		// the job once the first one failed.
		other bool
	}{{name: "the same replica once NATS is back"}, {name: "another replica", other: true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wd := newWorld(t)
			wd.archiveRecrawl(t)
			pub, p := streamtest.ConnectThrough(t, wd.nc.ConnectedUrl())
			p.Cut()
			waitFor(t, "the sink's connection to drop", func() bool { return !pub.IsConnected() })

			cfg := changes.Config{MaxURLs: 10}
			opts := changes.Options{Backfill: true}
			r1, _ := wd.replicaWith(t, cfg, opts, pub)
			r1.Ended(second)
			waitFor(t, "the summary released, the webhook delivered", func() bool {
				state, delivered := wd.claimState(t, second)
				return state == "released" && len(delivered) == 1 && delivered[0] == "webhook"
			})
			if published, posted := wd.sent(second); len(published) != 0 || len(posted) != 1 {
				t.Fatalf("while NATS is cut: %d published, %d posted; want 0 and 1", len(published), len(posted))
			}
			if tc.other {
				r2, _ := wd.replica(t, cfg, opts)
				r2.Ended(second)
				r2.Ended(marker2)
				wd.waitSent(t, marker2)
			} else {
				p.Mend()
			}
			waitFor(t, "the summary published", func() bool { published, _ := wd.sent(second); return len(published) > 0 })
			waitFor(t, "the claim settled as sent", func() bool { state, _ := wd.claimState(t, second); return state == "sent" })
			// A marker sent after it by the first replica: anything it would
			// still send of the job went out before.
			p.Mend()
			r1.Ended(marker1)
			wd.waitSent(t, marker1)
			published, posted := wd.sent(second)
			if len(published) != 1 || len(posted) != 1 {
				t.Fatalf("%d summaries published and %d posted, want exactly one each", len(published), len(posted))
			}
			if got := published[0]; got.Changed != 1 || got.Removed != 2 || got.New != 1 || got.Same != 1 {
				t.Errorf("published summary %+v, want the recrawl's counts", got)
			}
		})
	}
}
