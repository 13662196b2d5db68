package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/changes"
	"github.com/crawlhouse/crawlhouse/internal/changes/summary"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
)

// The two jobs of the change-tracking tests: a crawl of a 10-page site and
// crawlsim's recrawl of it, both of scope docs (limit 100, never reached).
const (
	scopedEarlier = "0193c000-0000-7000-8000-0000000000e1"
	scopedLater   = "0193c000-0000-7000-8000-0000000000e2"
	scopeMetadata = `{"scope":"docs","limit":100}`
	apiKey        = "crawl-api-key"
)

// crawlsimArgs are the flags of the earlier crawl; the recrawl adds
// -recrawl-of (and edits one page of each kind, crawlsim's default).
var crawlsimArgs = []string{"-seed", "26", "-pages", "10", "-page-bytes", "800", "-metadata", scopeMetadata,
	"-secret", secret, "-api-key", apiKey, "-retry-delays", "200ms"}

// wantRecrawl is every URL's class in the recrawl: page/0 edited, page/1
// reordered, page/2 answering 404, page/9 not found by the complete
// recrawl, added/0 new, the rest the same.
func wantRecrawl() map[string]string {
	want := map[string]string{
		"https://example.com/page/0":  "changed",
		"https://example.com/page/1":  "changed",
		"https://example.com/page/2":  "removed",
		"https://example.com/page/9":  "removed",
		"https://example.com/added/0": "new",
	}
	for i := 3; i < 9; i++ {
		want[fmt.Sprintf("https://example.com/page/%d", i)] = "same"
	}
	return want
}

// summaries collects the change summaries published on crawl.changes and
// POSTed to the webhook.
type summaries struct {
	url string
	mu  sync.Mutex
	got map[string][]summary.Job // "nats crawlID" or "webhook crawlID"
}

func collectSummaries(t *testing.T, natsURL string) *summaries {
	t.Helper()
	s := &summaries{got: map[string][]summary.Job{}}
	nc, _ := streamtest.Connect(t, natsURL)
	sub, err := nc.Subscribe(changes.Subject, func(m *nats.Msg) { s.add(t, "nats", m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("summary POST: %v", err)
		}
		s.add(t, "webhook", body)
	}))
	t.Cleanup(hook.Close)
	s.url = hook.URL
	return s
}

func (s *summaries) add(t *testing.T, via string, body []byte) {
	var sum summary.Job
	if err := json.Unmarshal(body, &sum); err != nil {
		t.Errorf("summary via %s: %v", via, err)
		return
	}
	s.mu.Lock()
	s.got[via+" "+sum.CrawlID] = append(s.got[via+" "+sum.CrawlID], sum)
	s.mu.Unlock()
}

func (s *summaries) of(via, crawlID string) []summary.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got[via+" "+crawlID])
}

// runCrawlsim runs the crawlsim binary (bin) with args, sending to target
// and serving its status API on listen until stopped.
func runCrawlsim(t *testing.T, bin, listen, target string, args ...string) (stop func(), out *logtest.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-listen", listen, "-target", target}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, stop = startProcess(t, cmd)
	return stop, out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// classesOf is each URL's class in a job: its versions' (page_changes) and
// the URLs it no longer found (page_removals).
func (p *pipeline) classesOf(t *testing.T, crawlID string) map[string]string {
	t.Helper()
	id := uuid.MustParse(crawlID)
	rows, err := p.conn.Query(context.Background(), "SELECT url, change FROM "+p.db+".page_changes WHERE crawl_id = ? UNION ALL SELECT url, change FROM "+p.db+".page_removals WHERE crawl_id = ?", id, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var url, class string
		if err := rows.Scan(&url, &class); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[url]; dup {
			t.Errorf("%s: two classes in job %s", url, crawlID)
		}
		out[url] = class
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// backfillDone waits until the sink's backfill has read the job to its end.
func (p *pipeline) backfillDone(t *testing.T, crawlID string) {
	t.Helper()
	waitFor(t, 3*time.Minute, "the backfill of job "+crawlID, func() bool {
		return clickhousetest.TryCount(p.conn, "SELECT count() FROM crawls WHERE crawl_id = ? AND backfill_state = 'done'", crawlID) == 1
	})
}

// scopedSinkEnv is the sink binary's environment: backfill from crawlsim's
// API at api, summaries to hook.
func (p *pipeline) scopedSinkEnv(api, hook string, extra env) env {
	e := maps.Clone(p.sinkEnv)
	delete(e, "SINK_LISTEN")
	maps.Copy(e, env{"CRAWL_API_URL": "http://" + api, "CRAWL_API_KEY": apiKey, "BACKFILL_QUIET_PERIOD": "2s",
		"CHANGES_WEBHOOK_URL": hook, "CHANGES_MAX_URLS": "10"})
	maps.Copy(e, extra)
	return e
}

// TestRecrawlSummaryThroughBinaries: the receiver, two sinks and crawlsim
// as built binaries. crawlsim crawls a site and then recrawls it with one
// page edited, one reordered, one answering 404, one gone and one added,
// both jobs of the same scope and complete; every URL of the recrawl gets
// exactly its class, each job gets one change summary on crawl.changes and
// one at the webhook (two sinks running), and `sink diff` shows the edit.
func TestRecrawlSummaryThroughBinaries(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, "")
	sums := collectSummaries(t, p.natsURL)
	rec := startReceiverBinary(t, env{"WEBHOOK_SECRETS": secret, "NATS_URL": p.natsURL, "LOG_LEVEL": "warn"})
	target := "http://" + rec.addr + "/webhooks/crawl"
	api := freeAddr(t)
	sinkEnv := p.scopedSinkEnv(api, sums.url, nil)
	sinks := []*binary{startSinkBinary(t, sinkEnv), startSinkBinary(t, sinkEnv)}
	crawlsimBin := build(t, "crawlsim")

	// One crawlsim at a time serves the API at api: the earlier job until
	// its backfill is done, then the recrawl.
	stop, _ := runCrawlsim(t, crawlsimBin, api, target, append([]string{"-crawl-id", scopedEarlier}, crawlsimArgs...)...)
	p.backfillDone(t, scopedEarlier)
	stop()
	stop, _ = runCrawlsim(t, crawlsimBin, api, target, append([]string{"-crawl-id", scopedLater, "-recrawl-of", scopedEarlier}, crawlsimArgs...)...)
	p.backfillDone(t, scopedLater)
	defer stop()

	if got, want := p.classesOf(t, scopedLater), wantRecrawl(); !maps.Equal(got, want) {
		t.Errorf("the recrawl's classes %v, want %v", got, want)
	}
	for url, class := range p.classesOf(t, scopedEarlier) {
		if class != "new" {
			t.Errorf("the first crawl's %s is %s, want new", url, class)
		}
	}

	for _, id := range []string{scopedEarlier, scopedLater} {
		waitFor(t, 2*time.Minute, "the summary of "+id, func() bool {
			return len(sums.of("nats", id)) > 0 && len(sums.of("webhook", id)) > 0
		})
	}
	// Stopped, the sinks send nothing more: what was sent is all there is.
	for _, s := range sinks {
		s.stop()
	}
	want := summary.Job{CrawlID: scopedLater, Kind: "crawl", Scope: "docs", Complete: true, New: 1, Changed: 2, Same: 6, Removed: 2,
		ChangedURLs: []string{"https://example.com/page/0", "https://example.com/page/1"},
		RemovedURLs: []string{"https://example.com/page/2", "https://example.com/page/9"}}
	for _, via := range []string{"nats", "webhook"} {
		got := sums.of(via, scopedLater)
		if len(got) != 1 {
			t.Fatalf("%d summaries of the recrawl via %s, want 1", len(got), via)
		}
		g := got[0]
		if !strings.Contains(g.Text, "2 changed") {
			t.Errorf("summary text %q", g.Text)
		}
		g.Text, g.SummarizedAt = "", time.Time{}
		if fmt.Sprint(g) != fmt.Sprint(want) {
			t.Errorf("summary via %s: %+v, want %+v", via, g, want)
		}
		if first := sums.of(via, scopedEarlier); len(first) != 1 || first[0].New != 10 {
			t.Errorf("summaries of the first crawl via %s: %+v, want one of 10 new pages", via, first)
		}
	}

	// The edited page's diff, as an operator asks for it.
	diff := exec.Command(build(t, "sink"), "diff", "https://example.com/page/0")
	diff.Env = []string{"PATH=" + os.Getenv("PATH"), "CLICKHOUSE_ADDR=" + p.chAddr, "CLICKHOUSE_DATABASE=" + p.db, "LOG_LEVEL=warn"}
	out, err := diff.CombinedOutput()
	if err != nil {
		t.Fatalf("sink diff: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "+"+strings.TrimSpace(crawlsim.EditedSentence)) || strings.Count(string(out), "\n+") != 3 {
		t.Errorf("sink diff of the edited page:\n%s", out)
	}
}

// TestRecrawlClassesSurviveReplayRedriveBackfill: the same two jobs through
// the built binaries, but part of the recrawl reaches the archive only by
// backfill (its deliveries dropped), some of it is delivered twice, one
// delivered page is refused by ClickHouse into the dead-letter stream and
// redriven after its backfilled copy was archived, and then both jobs are
// sent again whole (a replay past the duplicate window): every class is
// the one of the plain run, after the backfill and after it all, and each
// job still has one summary.
func TestRecrawlClassesSurviveReplayRedriveBackfill(t *testing.T) {
	t.Parallel()
	faults := []string{"-drops", "0.3", "-duplicates", "0.3"}
	later, err := crawlsim.NewCrawl(crawlsim.Options{ID: scopedLater, Pages: 10, PageBytes: 800, Seed: 26, Metadata: json.RawMessage(scopeMetadata),
		Faults:  crawlsim.Faults{Drops: 0.3, Duplicates: 0.3},
		Recrawl: &crawlsim.Recrawl{Of: scopedEarlier, Edited: 1, Reordered: 1, NotFound: 1, Gone: 1, Added: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// The page refused: the first one delivered; dropped pages counted.
	var poison string
	var delivered, dropped int
	for _, pg := range later.Pages {
		if pg.Has(crawlsim.FaultDrop) {
			dropped++
			continue
		}
		delivered++
		if poison == "" {
			poison = pg.URL
		}
	}
	if dropped == 0 || poison == "" {
		t.Fatalf("the recrawl drops %d pages and delivers %d: the test needs both", dropped, delivered)
	}

	p := newPipeline(t, "")
	sums := collectSummaries(t, p.natsURL)
	rec := startReceiverBinary(t, env{"WEBHOOK_SECRETS": secret, "NATS_URL": p.natsURL, "NATS_DEDUP_WINDOW": "1s", "LOG_LEVEL": "warn"})
	target := "http://" + rec.addr + "/webhooks/crawl"
	api := freeAddr(t)
	sinkEnv := p.scopedSinkEnv(api, sums.url, env{"NATS_DEDUP_WINDOW": "1s", "SINK_MAX_DELIVER": "1"})
	sink := startSinkBinary(t, sinkEnv)
	crawlsimBin := build(t, "crawlsim")

	stop, _ := runCrawlsim(t, crawlsimBin, api, target, append([]string{"-crawl-id", scopedEarlier}, crawlsimArgs...)...)
	p.backfillDone(t, scopedEarlier)
	stop()
	// A constraint stands in for anything ClickHouse refuses: the poison
	// page's delivery, not its backfilled copy.
	ctx := context.Background()
	if err := p.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE pages ADD CONSTRAINT poison CHECK NOT (crawl_id = toUUID('%s') AND url = '%s' AND origin = 'webhook')", scopedLater, poison)); err != nil {
		t.Fatal(err)
	}
	stop, _ = runCrawlsim(t, crawlsimBin, api, target, append(append([]string{"-crawl-id", scopedLater, "-recrawl-of", scopedEarlier}, faults...), crawlsimArgs...)...)
	p.backfillDone(t, scopedLater)
	stop()
	_, js := streamtest.Connect(t, p.natsURL)
	waitFor(t, 2*time.Minute, "the refused delivery dead-lettered", func() bool { return dlqMsgs(ctx, js) > 0 })
	if got, want := p.classesOf(t, scopedLater), wantRecrawl(); !maps.Equal(got, want) {
		t.Errorf("after the backfill: the recrawl's classes %v, want %v", got, want)
	}

	// The cause fixed, the dead letter redriven with the sink binary.
	if err := p.conn.Exec(ctx, "ALTER TABLE pages DROP CONSTRAINT poison"); err != nil {
		t.Fatal(err)
	}
	// The redriven row keeps its delivery's received_at, older than the
	// backfilled copy's, so a merge may replace it by that copy at any
	// moment: merges wait until the row has been seen.
	if err := p.conn.Exec(ctx, "SYSTEM STOP MERGES pages"); err != nil {
		t.Fatal(err)
	}
	redrive := exec.Command(build(t, "sink"), "redrive")
	for k, v := range sinkEnv {
		redrive.Env = append(redrive.Env, k+"="+v)
	}
	if out, err := redrive.CombinedOutput(); err != nil || !strings.Contains(string(out), "redriven ") {
		t.Fatalf("sink redrive: %v\n%s", err, out)
	}
	waitFor(t, 2*time.Minute, "the redriven delivery archived", func() bool {
		return clickhousetest.TryCount(p.conn, "SELECT count() FROM pages WHERE crawl_id = ? AND url = ? AND origin = 'webhook'", scopedLater, poison) > 0
	})
	if err := p.conn.Exec(ctx, "SYSTEM START MERGES pages"); err != nil {
		t.Fatal(err)
	}

	// Both jobs sent again whole, past the duplicate window: new rows of
	// the same versions.
	// The redriven delivery went back into the stream a moment ago: past
	// its 1 s duplicate window, its replay is new too.
	time.Sleep(1100 * time.Millisecond)
	replayedAt := time.Now()
	for _, args := range [][]string{
		append([]string{"-crawl-id", scopedEarlier}, crawlsimArgs...),
		append(append([]string{"-crawl-id", scopedLater, "-recrawl-of", scopedEarlier}, faults...), crawlsimArgs...),
	} {
		replay := exec.Command(crawlsimBin, append([]string{"-listen", "", "-exit", "-target", target}, args...)...)
		if out, err := replay.CombinedOutput(); err != nil {
			t.Fatalf("replay: %v\n%s", err, out)
		}
	}
	waitFor(t, 2*time.Minute, "the replays archived", func() bool {
		return clickhousetest.TryCount(p.conn, "SELECT uniqExact(crawl_id, url) FROM pages WHERE received_at >= ? AND origin = 'webhook'", replayedAt) == uint64(10+delivered)
	})
	if got, want := p.classesOf(t, scopedLater), wantRecrawl(); !maps.Equal(got, want) {
		t.Errorf("after the redrive and the replays: the recrawl's classes %v, want %v", got, want)
	}
	for url, class := range p.classesOf(t, scopedEarlier) {
		if class != "new" {
			t.Errorf("the first crawl's %s is %s, want new", url, class)
		}
	}
	for _, id := range []string{scopedEarlier, scopedLater} {
		waitFor(t, 2*time.Minute, "the summary of "+id, func() bool { return len(sums.of("webhook", id)) > 0 })
	}
	sink.stop()
	for _, id := range []string{scopedEarlier, scopedLater} {
		if n, m := len(sums.of("nats", id)), len(sums.of("webhook", id)); n != 1 || m != 1 {
			t.Errorf("job %s: %d summaries published and %d posted, want one each", id, n, m)
		}
	}
}
