package sinkcmd_test

import (
	"context"
	"encoding/json"
	"errors"
	crawlenv "github.com/crawlhouse/crawlhouse/internal/env"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// TestDeleteTakesDownEverywhere runs `sink delete --prefix` against a
// running sink: the archived pages under the prefix, its dead letter and
// its quarantined delivery are removed, the rest stays, the audit record
// lists the counts; the same page delivered again is not archived while
// the takedown holds, and is once it is lifted.
func TestDeleteTakesDownEverywhere(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e["SINK_MAX_DELIVER"] = "1"
	s := startSink(t, e, sinkcmd.Options{})
	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	waitFor(t, 2*time.Minute, "ready", func() bool { c, _ := httpGet(t, "http://"+s.addr+"/readyz"); return c == 200 })
	ctx := context.Background()
	// /secret/stuck is refused by ClickHouse once, and dead-lettered.
	if err := conn.Exec(ctx, "ALTER TABLE pages ADD CONSTRAINT stuck CHECK url != 'https://site.test/secret/stuck'"); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, e["NATS_URL"])
	crawl := uuid.NewString()
	secret := pageBody(crawl, uuid.NewString(), "https://site.test/secret/a", "private")
	p.publish(t, secret)
	p.publish(t, pageBody(crawl, uuid.NewString(), "https://site.test/public", "public"))
	p.publish(t, pageBody(crawl, uuid.NewString(), "https://site.test/secret/stuck", "private too"))
	onlyDeadLetter(t, p.js)
	if err := conn.Exec(ctx, "ALTER TABLE pages DROP CONSTRAINT stuck"); err != nil {
		t.Fatal(err)
	}
	// The receiver's quarantine: one refused delivery under the prefix, one
	// not.
	if _, err := p.js.CreateStream(ctx, jetstream.StreamConfig{Name: "CRAWL_REJECTED_INVALID", Subjects: []string{"CRAWL_REJECTED.invalid"}}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"type":"crawl.page","id":"x","data":[{"metadata":{"url":"https://site.test/secret/b"}}]}`, `{"type":"crawl.page","id":"x","data":[]}`} {
		if _, err := p.js.Publish(ctx, "CRAWL_REJECTED.invalid", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	pages := func(url string) uint64 {
		return clickhousetest.TryCount(conn, "SELECT count() FROM pages FINAL WHERE url = ?", url)
	}
	waitFor(t, time.Minute, "the pages archived", func() bool { return pages("https://site.test/secret/a") == 1 && pages("https://site.test/public") == 1 })

	out := &logtest.Buffer{}
	if err := sinkcmd.Run(ctx, []string{"sink", "delete", "--prefix", "https://site.test/secret/", "--reason", "court order 7", "--by", "legal@example.test"}, e.get, out, out); err != nil {
		t.Fatalf("sink delete: %v\n%s", err, out)
	}
	for _, want := range []string{"pages 1,", "page_versions 1,", "stream CRAWL_DLQ 1,", "stream CRAWL_REJECTED_INVALID 1,", "stream CRAWL_REJECTED_UNVERIFIED 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sink delete printed no %q:\n%s", want, out)
		}
	}
	id := regexp.MustCompile(`takedown ([0-9a-f-]{36})`).FindStringSubmatch(out.String())
	if id == nil {
		t.Fatalf("sink delete printed no takedown id:\n%s", out)
	}
	if n := pages("https://site.test/secret/a"); n != 0 {
		t.Errorf("the page taken down is still archived (%d rows)", n)
	}
	if n := pages("https://site.test/public"); n != 1 {
		t.Errorf("the page not taken down: %d rows, want 1", n)
	}
	for name, want := range map[string]uint64{"CRAWL_DLQ": 0, "CRAWL_REJECTED_INVALID": 1} {
		st, err := p.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := st.Info(ctx); err != nil || info.State.Msgs != want {
			t.Errorf("%s holds %d messages after the takedown (%v), want %d", name, info.State.Msgs, err, want)
		}
	}
	if n := clickhousetest.Count(t, conn, "SELECT count() FROM takedowns FINAL WHERE reason = 'court order 7' AND requested_by = 'legal@example.test' AND selector = 'prefix' AND deleted['pages'] = 1 AND lifted_at IS NULL"); n != 1 {
		t.Errorf("audit records of the takedown with its counts: %d, want 1", n)
	}

	// Delivered again (the sender's retry, a replay), the page stays out;
	// a page delivered after it is archived, so the sink did read it.
	p.publish(t, pageBody(crawl, uuid.NewString(), "https://site.test/secret/a", "private"))
	p.publish(t, pageBody(crawl, uuid.NewString(), "https://site.test/after", "after"))
	waitFor(t, time.Minute, "the page after", func() bool { return pages("https://site.test/after") == 1 })
	if n := pages("https://site.test/secret/a"); n != 0 {
		t.Errorf("the page taken down came back with a replayed delivery (%d rows)", n)
	}

	out = &logtest.Buffer{}
	if err := sinkcmd.Run(ctx, []string{"sink", "delete", "--lift", id[1], "--reason", "order overturned"}, e.get, out, out); err != nil {
		t.Fatalf("sink delete --lift: %v\n%s", err, out)
	}
	p.publish(t, pageBody(crawl, uuid.NewString(), "https://site.test/secret/a", "private"))
	waitFor(t, time.Minute, "the page archived after the lift", func() bool { return pages("https://site.test/secret/a") == 1 })
	out = &logtest.Buffer{}
	if err := sinkcmd.Run(ctx, []string{"sink", "delete", "--list"}, e.get, out, out); err != nil || !strings.Contains(out.String(), id[1]) || !strings.Contains(out.String(), "lifted") {
		t.Errorf("sink delete --list: %v\n%s", err, out)
	}
}

// TestDeleteArguments: a takedown names exactly one selector and a reason;
// every mistake in the arguments is a usage error (cmd/sink exits 2).
func TestDeleteArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--url", "https://a.test/"},
		{"--url", "https://a.test/", "--host", "a.test", "--reason", "r"},
		{"--url", "ftp://a.test/x", "--reason", "r"},
		{"--prefix", "https://", "--reason", "r"},
		{"--host", "a.test/x", "--reason", "r"},
		{"--job", "not-a-uuid", "--reason", "r"},
		{"--lift", "nope", "--reason", "r"},
		{"--reason", "r"},
		{"--dry-run"},
		{"--list", "--dry-run"},
		{"--host", "a.test", "--json", "--reason", "r"},
		{"--host", "a.test", "--dry-run", "--no-such-flag"},
	} {
		err := sinkcmd.Run(context.Background(), append([]string{"sink", "delete"}, args...), env{}.get, &logtest.Buffer{}, &logtest.Buffer{})
		if !errors.Is(err, crawlenv.ErrUsage) {
			t.Errorf("sink delete %v: %v, want a usage error", args, err)
		}
	}
}

// TestDeletePrefixStaysOnItsHost: `sink delete --prefix https://example.com`
// shows first (--dry-run) and then removes the pages of example.com in
// every spelling, and never those of example.community or
// example.com.evil.test; --list --json prints the audit record in the read
// API's shapes.
func TestDeletePrefixStaysOnItsHost(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	cfg, err := sinkcmd.Load(e.get)
	if err != nil {
		t.Fatal(err)
	}
	if err := sinkcmd.Run(ctx, []string{"sink", "migrate"}, e.get, &logtest.Buffer{}, &logtest.Buffer{}); err != nil {
		t.Fatal(err)
	}
	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	store, err := archive.NewStore(conn, cfg.ArchiveConfig)
	if err != nil {
		t.Fatal(err)
	}
	job := uuid.New()
	var rows archive.Rows
	for _, u := range []string{"https://example.com/a", "https://EXAMPLE.COM./b", "https://example.community/c", "https://example.com.evil.test/d"} {
		rows.Pages = append(rows.Pages, archive.Page{CrawlID: job, URL: u, WebhookID: uuid.New(), Origin: archive.OriginWebhook, Success: true, StatusCode: 200, ReceivedAt: time.Now().UTC()})
	}
	if err := store.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out := &logtest.Buffer{}
		if err := sinkcmd.Run(ctx, append([]string{"sink", "delete"}, args...), e.get, out, out); err != nil {
			t.Fatalf("sink delete %v: %v\n%s", args, err, out)
		}
		return out.String()
	}
	left := func() []string {
		var urls []string
		if err := conn.QueryRow(ctx, "SELECT groupArray(url) FROM (SELECT url FROM pages ORDER BY url)").Scan(&urls); err != nil {
			t.Fatal(err)
		}
		return urls
	}
	others := []string{"https://example.com.evil.test/d", "https://example.community/c"}

	var dry sinkcmd.DryRunJSON
	if err := json.Unmarshal([]byte(run("--prefix", "https://example.com", "--dry-run", "--json")), &dry); err != nil {
		t.Fatal(err)
	}
	if dry.Selector != "prefix" || dry.Value != "https://example.com/" || dry.WouldRemove["pages"] != 2 || dry.WouldRemove["page_versions"] != 2 {
		t.Errorf("dry run answered %+v, want prefix https://example.com/ removing 2 pages and 2 versions", dry)
	}
	if n := len(left()); n != 4 {
		t.Errorf("the dry run removed pages: %d left, want 4", n)
	}
	if out := run("--prefix", "https://example.com", "--reason", "court order 8", "--by", "legal"); !strings.Contains(out, "pages 2,") {
		t.Errorf("sink delete printed no \"pages 2,\":\n%s", out)
	}
	if got := left(); !slices.Equal(got, others) {
		t.Errorf("after the takedown pages holds %q, want only %q", got, others)
	}

	var list sinkcmd.TakedownsJSON
	if err := json.Unmarshal([]byte(run("--list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Takedowns) != 1 {
		t.Fatalf("--list --json: %+v, want one takedown", list)
	}
	got := list.Takedowns[0]
	if got.Selector != "prefix" || got.Value != "https://example.com/" || got.Reason != "court order 8" || got.RequestedBy != "legal" ||
		got.Deleted["pages"] != 2 || !got.InForce || got.LiftedAt != nil || got.CreatedAt.IsZero() {
		t.Errorf("--list --json: %+v", got)
	}
	if err := json.Unmarshal([]byte(run("--host", "BÜCHER.example.", "--dry-run", "--json")), &dry); err != nil {
		t.Fatal(err)
	}
	if dry.Value != "xn--bcher-kva.example" || dry.ValueUnicode != "bücher.example" {
		t.Errorf("dry run of a Unicode host: %+v, want its IDNA and Unicode forms", dry)
	}
}
