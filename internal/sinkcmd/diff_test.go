package sinkcmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/testkit/trackingtest"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
)

// TestDiff: versions of a pricing page archived by three crawls (the
// second crawl's delivered twice), as `sink diff` shows them: the latest
// two by default, the ones --from and --to pick, nothing for identical
// versions, and errors naming the URL for a page with one version, an
// unknown page and a job without the page. The page's and the URL's
// control characters never reach the terminal.
func TestDiff(t *testing.T) {
	t.Parallel()
	addr, db := clickhousetest.NewDatabase(t)
	e := env{"NATS_URL": "nats://127.0.0.1:4222", "CLICKHOUSE_ADDR": addr, "CLICKHOUSE_DATABASE": db, "LOG_LEVEL": "warn"}
	ctx := context.Background()
	if err := sinkcmd.Run(ctx, []string{"sink", "migrate"}, e.get, &strings.Builder{}, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := sinkcmd.Load(e.get)
	if err != nil {
		t.Fatal(err)
	}
	w, err := archive.NewWriter(clickhousetest.Open(t, db), cfg.ArchiveConfig)
	if err != nil {
		t.Fatal(err)
	}

	const url = "https://shop.example/pricing"
	const hostileURL = "https://evil.example/\x1b[2Jpage"
	job1, job2, job3 := uuid.New(), uuid.New(), uuid.New()
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	page := func(job uuid.UUID, url string, at time.Duration, md string) archive.Page {
		doc, _ := json.Marshal(map[string]any{"markdown": md, "metadata": map[string]any{"statusCode": 200}})
		return archive.Page{CrawlID: job, JobKind: "crawl", URL: url, WebhookID: uuid.New(), Origin: archive.OriginWebhook,
			Success: true, StatusCode: 200, Markdown: md, Document: doc, ReceivedAt: t0.Add(at)}
	}
	v1 := "# Pricing\n\nFree: $0\nPro: $10\nTeam: $50\n"
	v2 := "# Pricing\n\nFree: $0\nPro: $12\nTeam: $50\n"
	v3 := "# Pricing\n\nFree: $0\nPro: $12\nTeam: $50\nEnterprise: ask\n"
	rows := archive.Rows{Pages: []archive.Page{
		page(job1, url, 0, v1),
		page(job2, url, time.Hour, "an earlier delivery of job 2, replaced by its newer one"),
		page(job2, url, time.Hour+time.Minute, v2),
		page(job3, url, 2*time.Hour, v3),
		page(job1, "https://shop.example/once", 0, "only here"),
		page(job1, "https://shop.example/same", 0, "a\nb\n"),
		page(job2, "https://shop.example/same", time.Hour, "a\r\nb\r\n"),
		page(job1, hostileURL, 0, "safe\n"),
		page(job2, hostileURL, time.Hour, "safe\n\x1b]8;;https://evil/\x07link \u202Etxt.exe\x9b31m\n"),
	}}
	if err := w.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	name := func(u string, job uuid.UUID, at time.Duration) string {
		return fmt.Sprintf("%s (job %s, received %s, status 200)", u, job, t0.Add(at).Format(time.RFC3339))
	}
	run := func(args ...string) (string, error) {
		var out strings.Builder
		err := sinkcmd.Run(ctx, append([]string{"sink", "diff"}, args...), e.get, &out, &out)
		return out.String(), err
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"latest two", []string{url},
			"--- " + name(url, job2, time.Hour+time.Minute) + "\n+++ " + name(url, job3, 2*time.Hour) + "\n" +
				"@@ -3,3 +3,4 @@\n Free: $0\n Pro: $12\n Team: $50\n+Enterprise: ask\n"},
		{"from and to, flags after the url", []string{url, "--from", job1.String(), "--to", job2.String()},
			"--- " + name(url, job1, 0) + "\n+++ " + name(url, job2, time.Hour+time.Minute) + "\n" +
				"@@ -1,5 +1,5 @@\n # Pricing\n \n Free: $0\n-Pro: $10\n+Pro: $12\n Team: $50\n"},
		{"from only: to the newest", []string{"--from", job1.String(), url},
			"--- " + name(url, job1, 0) + "\n+++ " + name(url, job3, 2*time.Hour) + "\n" +
				"@@ -1,5 +1,6 @@\n # Pricing\n \n Free: $0\n-Pro: $10\n+Pro: $12\n Team: $50\n+Enterprise: ask\n"},
		{"to only: from the one before", []string{"--to", job2.String(), url},
			"--- " + name(url, job1, 0) + "\n+++ " + name(url, job2, time.Hour+time.Minute) + "\n" +
				"@@ -1,5 +1,5 @@\n # Pricing\n \n Free: $0\n-Pro: $10\n+Pro: $12\n Team: $50\n"},
		{"reversed", []string{url, "--from", job3.String(), "--to", job1.String()},
			"--- " + name(url, job3, 2*time.Hour) + "\n+++ " + name(url, job1, 0) + "\n" +
				"@@ -1,6 +1,5 @@\n # Pricing\n \n Free: $0\n-Pro: $12\n+Pro: $10\n Team: $50\n-Enterprise: ask\n"},
		{"only line endings changed", []string{"https://shop.example/same"},
			"no change in https://shop.example/same between " + name("", job1, 0)[1:] + " and " + name("", job2, time.Hour)[1:] + "\n"},
		{"hostile page and url", []string{hostileURL},
			"--- " + name("https://evil.example/\uFFFD[2Jpage", job1, 0) + "\n+++ " + name("https://evil.example/\uFFFD[2Jpage", job2, time.Hour) + "\n" +
				"@@ -1 +1,2 @@\n safe\n+\uFFFD]8;;https://evil/\uFFFDlink \uFFFDtxt.exe\uFFFD31m\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := run(tc.args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, got)
			}
			if got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			for _, r := range got {
				if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
					t.Errorf("control character %U in the output", r)
				}
			}
		})
	}

	// --json prints the read API's GET /v1/pages/diff body.
	out, err := run("--json", url, "--from", job1.String(), "--to", job2.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var d reader.DiffAnswer
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("sink diff --json: %v\n%s", err, out)
	}
	if d.URL != url || d.From.JobID != job1.String() || d.To.JobID != job2.String() || !d.Changed ||
		!d.To.ReceivedAt.Equal(t0.Add(time.Hour+time.Minute)) || !strings.Contains(d.Unified, "-Pro: $10\n+Pro: $12\n") {
		t.Errorf("sink diff --json: %+v", d)
	}
	// ... and in it the crawl API's changeTracking object, as the read API
	// computes it (testdata/changetracking).
	var raw struct {
		ChangeTracking json.RawMessage `json:"changeTracking"`
	}
	_ = json.Unmarshal([]byte(out), &raw)
	trackingtest.CheckShape(t, raw.ChangeTracking, "changed.json")
	if ct := d.ChangeTracking; ct == nil || ct.ChangeStatus != events.ChangeChanged || ct.Visibility != events.VisibilityVisible ||
		ct.PreviousScrapeAt == nil || *ct.PreviousScrapeAt != "2026-11-01T10:00:00.000Z" ||
		ct.Diff == nil || !strings.HasPrefix(ct.Diff.Text, "===================================================================\n--- previous.md\t\n+++ current.md\t\n@@ ") ||
		!strings.Contains(ct.Diff.Text, "\n-Pro: $10\n+Pro: $12\n") {
		t.Errorf("sink diff --json changeTracking: %s", raw.ChangeTracking)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"one version", []string{"https://shop.example/once"}, "sink diff: the archive has only one version of https://shop.example/once (job " + job1.String() + "): nothing to compare"},
		{"one version, from its job", []string{"https://shop.example/once", "--from", job1.String()}, "sink diff: the archive has only one version of https://shop.example/once (job " + job1.String() + "): nothing to compare"},
		{"unknown url", []string{"https://shop.example/never\x1b[31m"}, "sink diff: the archive has no version of https://shop.example/never\uFFFD[31m"},
		{"job without the url", []string{"https://shop.example/once", "--to", job3.String()}, "sink diff: https://shop.example/once: job " + job3.String() + ": the job holds no version of the URL"},
		{"bad job id", []string{url, "--from", "nope"}, "sink diff: from job id: invalid UUID length: 4"},
		{"no url", []string{"--from", job1.String()}, "usage: sink diff <url> [--from JOB] [--to JOB] [--json]"},
		{"two urls", []string{url, url}, "usage: sink diff <url> [--from JOB] [--to JOB] [--json]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.args...)
			if err == nil {
				t.Fatalf("no error; printed\n%s", out)
			}
			if err.Error() != tc.want {
				t.Errorf("error %q\nwant  %q", err, tc.want)
			}
		})
	}
}
