package e2e_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
)

// senderVersions are the golden deliveries of the sender versions other
// than the captured 2026 runs (testdata/fixtures/senders/README.md): each
// folder's README names the sender's commit and files it follows.
var senderVersions = []string{"firecrawl-2025-10", "firecrawl-v1", "firecrawl-monitor", "firecrawl-extract", "firecrawl-v0"}

// TestSenderVersionsArchived replays every golden delivery of every sender
// version through the receiver and the sink, as users run them, with the
// sender's own signature header and secret, then replays them all again,
// and checks what users of each version rely on: every delivery answered
// 200 and its replay answered duplicate under the same key (the webhookId,
// or for senders without one the key derived from the body); each stored
// once in the stream; pages archived as pages once, the failed ones counted
// once; job events in crawl_events; every other type kept whole in events
// under its type and job id, with the monitor's per-URL status in
// monitor_pages; nothing dead-lettered.
func TestSenderVersionsArchived(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, "")
	url := p.startReceiver(t, env{"WEBHOOK_SECRETS": realSecret})
	sink := p.startSink(t, nil)

	type sent struct {
		realDelivery
		folder, job, key string
	}
	var all []sent
	for _, folder := range senderVersions {
		for _, d := range readRun(t, "../"+folder) {
			job := d.event.ID
			if job == "" {
				job = d.event.JobID
			}
			all = append(all, sent{realDelivery: d, folder: folder, job: job})
		}
	}
	for round, want := range []string{"accepted", "duplicate"} {
		for i := range all {
			d := &all[i]
			code, answer := replay(t, url, d.realDelivery)
			var a struct{ Status, WebhookID string }
			if err := json.Unmarshal([]byte(answer), &a); code != 200 || err != nil || a.Status != want {
				t.Fatalf("round %d, %s/%s: %d %s, want 200 %s", round, d.folder, d.name, code, answer, want)
			}
			key := d.event.WebhookID
			if key == "" {
				key = events.DerivedKey(d.body)
			}
			if a.WebhookID != key || (round == 1 && a.WebhookID != d.key) {
				t.Fatalf("%s/%s answered key %s, want %s (first answer %s)", d.folder, d.name, a.WebhookID, key, d.key)
			}
			d.key = a.WebhookID
		}
	}

	// What each class of type must leave.
	var pages, failed, jobEvents, rawEvents, monitorURLs int
	for _, d := range all {
		switch events.ClassOf(d.event.Type) {
		case events.ClassPage:
			pages++
			if !d.event.Success {
				failed++
			}
		case events.ClassJob:
			jobEvents++
		case events.ClassRaw:
			rawEvents++
			if d.event.Type == events.TypeMonitorPage {
				monitorURLs++
			}
		}
	}
	if failed == 0 || jobEvents == 0 || rawEvents == 0 || monitorURLs == 0 {
		t.Fatalf("the goldens lack a kind: %d failed pages, %d job events, %d raw events, %d monitor URLs", failed, jobEvents, rawEvents, monitorURLs)
	}
	count := func(q string, args ...any) int {
		return int(clickhousetest.TryCount(p.conn, strings.ReplaceAll(q, "DB.", p.db+"."), args...))
	}
	waitFor(t, 2*time.Minute, "every delivery archived", func() bool {
		return count("SELECT count() FROM DB.pages FINAL") == pages &&
			count("SELECT count() FROM DB.failures FINAL") == failed &&
			count("SELECT count() FROM DB.crawl_events FINAL") == jobEvents &&
			count("SELECT count() FROM DB.events FINAL") == rawEvents &&
			count("SELECT count() FROM DB.monitor_pages FINAL") == monitorURLs
	})

	// Stored once each: the replays were duplicates in the stream.
	_, js := streamtest.Connect(t, p.natsURL)
	ctx := context.Background()
	st, err := js.Stream(ctx, "CRAWL_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if int(info.State.Msgs) != len(all) {
		t.Errorf("stream holds %d messages for %d deliveries", info.State.Msgs, len(all))
	}
	if n := dlqMsgs(ctx, js); n != 0 {
		t.Errorf("%d deliveries dead-lettered", n)
	}

	for _, d := range all {
		switch events.ClassOf(d.event.Type) {
		case events.ClassPage:
			u, _, _ := pageURL(t, d.event.Data[0])
			got := p.pagesOf(t, d.job)[u]
			if got.webhookID != d.key || got.document != string(d.event.Data[0]) || got.success != d.event.Success {
				t.Errorf("%s/%s: page %s archived as %+v, want webhook id %s, its Document, success %v", d.folder, d.name, u, got, d.key, d.event.Success)
			}
			if !d.event.Success {
				if n := p.failuresOf(t, d.job)[u]; n != 1 {
					t.Errorf("%s/%s: %d failures rows for %s, want 1", d.folder, d.name, n, u)
				}
			}
		case events.ClassJob:
			if n := count("SELECT count() FROM DB.crawl_events FINAL WHERE toString(crawl_id) = ? AND type = ? AND toString(webhook_id) = ? AND event = ?",
				d.job, d.event.Type, d.key, string(d.body)); n != 1 {
				t.Errorf("%s/%s: %d crawl_events rows holding it, want 1", d.folder, d.name, n)
			}
		case events.ClassRaw:
			if n := count("SELECT count() FROM DB.events FINAL WHERE job_id = ? AND type = ? AND toString(webhook_id) = ? AND event = ?",
				d.job, d.event.Type, d.key, string(d.body)); n != 1 {
				t.Errorf("%s/%s: %d events rows holding it under its type and job id, want 1", d.folder, d.name, n)
			}
		}
	}

	// The monitor's per-URL status, as each sender version reported it.
	for _, c := range []struct {
		check, url, status, current string
		meaningful                  string
	}{
		{"019e0a1b-2c3d-7e4f-8a5b-6c7d8e9f0a05", "http://127.0.0.1:57080/pages/p01.html", "changed", "01a20982-16ba-75d9-96a5-a48055289ed2", "null"},
		{"019e0a1b-2c3d-7e4f-8a5b-6c7d8e9f0a05", "http://127.0.0.1:57080/pages/p02.html", "new", "", "null"},
		{"019e0a1b-2c3d-7e4f-8a5b-6c7d8e9f0a06", "http://127.0.0.1:57080/pages/p01.html", "changed", "", "true"},
		{"019e0a1b-2c3d-7e4f-8a5b-6c7d8e9f0a06", "http://127.0.0.1:57099/down.html", "error", "", "null"},
	} {
		var status, current, meaningful string
		err := p.conn.QueryRow(ctx, "SELECT status, current_scrape_id, ifNull(toString(is_meaningful), 'null') FROM "+p.db+".monitor_pages FINAL WHERE check_id = ? AND url = ?", c.check, c.url).
			Scan(&status, &current, &meaningful)
		if err != nil {
			t.Errorf("monitor_pages %s %s: %v", c.check, c.url, err)
			continue
		}
		if status != c.status || (c.current != "" && current != c.current) || meaningful != c.meaningful {
			t.Errorf("monitor_pages %s %s: status %q current %q meaningful %q, want %q %q %q", c.check, c.url, status, current, meaningful, c.status, c.current, c.meaningful)
		}
	}

	// Failures counted once, by the metric the alerts read too.
	text := scrapeText(t, "http://"+sink.addr+"/metrics")
	for name, want := range map[string]int{"crawlhouse_page_failures_total": failed, "crawlhouse_sink_dead_letters_total": 0} {
		if got := metricLine(text, name); got != strconv.Itoa(want) {
			t.Errorf("%s = %q, want %d", name, got, want)
		}
	}
}

// metricLine is the value of an unlabelled sample in a Prometheus text
// exposition, "" when absent.
func metricLine(exposition, name string) string {
	for line := range strings.SplitSeq(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}
