package archive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// The sink's path from a stored delivery to rows: the same two calls as
// internal/sink's decode.
func sinkRows(body []byte, at time.Time) (*events.Event, archive.Rows, error) {
	ev, err := events.DecodeAccepted(body)
	if err != nil {
		return nil, archive.Rows{}, fmt.Errorf("decode: %w", err)
	}
	r, err := archive.EventRows(ev, body, at)
	if err != nil {
		return ev, r, fmt.Errorf("rows: %w", err)
	}
	return ev, r, nil
}

// checkArchived holds the rule "a delivery the receiver accepts, the sink
// archives" for one body: when events.Validate accepts it, the sink's
// decoding and mapping succeed and give, with the head's ids (the
// webhookId or the key derived from the body), a crawl_events row holding
// the body (a job event), an events row holding the body with its type and
// job id (any other type that is not a page event, whatever its data), or
// for a page event a page row per Document that has
// a URL (its document the bytes of data[i]) and a failure row for each
// other Document, or one failure row when data is empty. A successful page
// event gives a page row for every Document, and the status a page row
// stores is the one its failure decision read. It reports whether body was
// accepted and the rows.
func checkArchived(t *testing.T, body []byte) (bool, archive.Rows) {
	t.Helper()
	h, err := events.Validate(body)
	if err != nil {
		return false, archive.Rows{}
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ev, r, err := sinkRows(body, at)
	if err != nil {
		t.Fatalf("accepted (%+v) but not archived: %v\nbody %.400q", h, err, body)
	}
	for _, p := range r.Pages {
		if p.CrawlID.String() != h.CrawlID || p.WebhookID.String() != h.WebhookID {
			t.Fatalf("page row ids %s/%s, head %+v", p.CrawlID, p.WebhookID, h)
		}
	}
	for _, f := range r.Failures {
		if f.WebhookID.String() != h.WebhookID {
			t.Fatalf("failure row webhook id %s, head %+v", f.WebhookID, h)
		}
	}
	switch events.ClassOf(h.Type) {
	case events.ClassJob:
		if len(r.Pages)+len(r.Failures)+len(r.RawEvents) != 0 || len(r.CrawlEvents) != 1 || string(r.CrawlEvents[0].Event) != string(body) {
			t.Fatalf("%s: rows %d pages %d failures %d crawl events %d events, want the one crawl_events row holding the body",
				h.Type, len(r.Pages), len(r.Failures), len(r.CrawlEvents), len(r.RawEvents))
		}
		if e := r.CrawlEvents[0]; e.CrawlID.String() != h.CrawlID || e.WebhookID.String() != h.WebhookID {
			t.Fatalf("crawl_events row ids %s/%s, head %+v", e.CrawlID, e.WebhookID, h)
		}
		return true, r
	case events.ClassRaw:
		if len(r.Pages)+len(r.Failures)+len(r.CrawlEvents) != 0 || len(r.RawEvents) != 1 || string(r.RawEvents[0].Event) != string(body) {
			t.Fatalf("%s: rows %d pages %d failures %d crawl events %d events, want the one events row holding the body",
				h.Type, len(r.Pages), len(r.Failures), len(r.CrawlEvents), len(r.RawEvents))
		}
		if e := r.RawEvents[0]; e.JobID != h.CrawlID || e.Type != h.Type || e.WebhookID.String() != h.WebhookID {
			t.Fatalf("events row %q %q %s, head %+v", e.JobID, e.Type, e.WebhookID, h)
		}
		for _, m := range r.MonitorPages {
			if m.URL == "" || m.WebhookID.String() != h.WebhookID {
				t.Fatalf("monitor_pages row %+v, head %+v", m, h)
			}
		}
		if len(r.MonitorPages) > 0 && h.Type != events.TypeMonitorPage {
			t.Fatalf("%s gave %d monitor_pages rows", h.Type, len(r.MonitorPages))
		}
		return true, r
	}
	if len(r.CrawlEvents)+len(r.RawEvents)+len(r.MonitorPages) != 0 {
		t.Fatalf("page event gave %d crawl_events, %d events rows", len(r.CrawlEvents), len(r.RawEvents))
	}
	// data[i] as encoding/json sees it, independently of events' decoding.
	var raw struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("accepted body does not decode: %v", err)
	}
	if len(raw.Data) != h.Documents || len(ev.Data) != h.Documents {
		t.Fatalf("documents: head %d, encoding/json %d, decoded %d", h.Documents, len(raw.Data), len(ev.Data))
	}
	if len(raw.Data) == 0 {
		if len(r.Pages) != 0 || len(r.Failures) != 1 || r.Failures[0].Error == "" {
			t.Fatalf("page event without documents: %d pages, failures %+v; want one failure row", len(r.Pages), r.Failures)
		}
		return true, r
	}
	pages, noURL := 0, 0
	for i := range raw.Data {
		if ev.Data[i].Metadata.PageURL() == "" {
			noURL++
			continue
		}
		if pages >= len(r.Pages) {
			t.Fatalf("data[%d] has a URL and no page row", i)
		}
		p := r.Pages[pages]
		pages++
		if string(p.Document) != string(raw.Data[i]) {
			t.Fatalf("data[%d]: document\n got %.300q\nwant %.300q", i, p.Document, raw.Data[i])
		}
		if p.URL == "" {
			t.Fatalf("data[%d]: page row without a URL", i)
		}
		if p.Success && p.StatusCode >= 400 {
			t.Fatalf("data[%d]: successful page with status %d", i, p.StatusCode)
		}
		if ev.Success && ev.Data[i].Metadata.Error == "" && p.Error != "" && p.Error != "HTTP "+strconv.Itoa(int(p.StatusCode)) {
			t.Fatalf("data[%d]: error %q beside status_code %d", i, p.Error, p.StatusCode)
		}
	}
	if pages != len(r.Pages) {
		t.Fatalf("%d page rows for %d documents with a URL", len(r.Pages), pages)
	}
	if h.Success && noURL > 0 {
		t.Fatalf("Validate accepted a successful page event with %d documents without a URL", noURL)
	}
	failedPages := 0
	for _, p := range r.Pages {
		if !p.Success {
			failedPages++
		}
	}
	if len(r.Failures) != failedPages+noURL {
		t.Fatalf("%d failure rows, want %d (failed pages) + %d (documents without a URL)", len(r.Failures), failedPages, noURL)
	}
	return true, r
}

// fixtureBodies are the deliveries the real sender made: the repository's
// fixtures and the captured runs.
func fixtureBodies(tb testing.TB) [][]byte {
	tb.Helper()
	var paths []string
	for _, glob := range []string{
		"../../testdata/fixtures/*.json",
		"../../testdata/fixtures/firecrawl-2026/run*/*.body",
		// The golden deliveries of the other sender versions.
		"../../testdata/fixtures/firecrawl-*/[0-9]*.body",
	} {
		m, err := filepath.Glob(glob)
		if err != nil {
			tb.Fatal(err)
		}
		paths = append(paths, m...)
	}
	if len(paths) < 80 {
		tb.Fatalf("found %d fixtures, want the repository's and the captured runs", len(paths))
	}
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// wrongValues are values of every JSON type, and numbers at the edges.
var wrongValues = []string{
	`5`, `-1`, `404.7`, `70000`, `1e999`, `"x"`, `"404"`, `""`, `"\u0000"`,
	`[]`, `["a",5]`, `[null]`, `{}`, `{"a":1}`, `null`, `true`,
}

// fewWrongValues are one value of each JSON type the fields do not expect,
// for the fuzz target's seeds: the engine runs every seed with coverage
// before it starts, so they are kept few (the tests run all of
// wrongValues).
var fewWrongValues = []string{`5`, `"x"`, `[]`, `{}`, `null`}

// documentKeys are the keys Document and its parts decode, by where they
// sit.
var (
	topKeys      = []string{"success", "type", "id", "jobId", "webhookId", "data", "error", "metadata"}
	documentKeys = []string{"markdown", "summary", "html", "rawHtml", "screenshot", "audio", "video", "answer",
		"highlights", "links", "actions", "metadata", "warning", "changeTracking", "branding", "Markdown"}
	metadataKeys = []string{"title", "description", "language", "sourceURL", "url", "keywords",
		"ogLocaleAlternate", "statusCode", "contentType", "error", "scrapeId", "concurrencyLimited",
		"concurrencyQueueDurationMs", "ogTitle"}
	nestedKeys = map[string][]string{
		"actions":        {"screenshots", "scrapes", "javascriptReturns", "pdfs"},
		"changeTracking": {"previousScrapeAt", "changeStatus", "visibility", "diff", "json"},
	}
)

type object = map[string]json.RawMessage

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// hostileMutations are base with a value of every type in every known
// field: top-level, in data[0], in data[0].metadata, in data[0]'s nested
// objects; and data[0] without a URL, data empty.
func hostileMutations(tb testing.TB, base []byte, values []string) [][]byte {
	tb.Helper()
	var top object
	if err := json.Unmarshal(base, &top); err != nil {
		tb.Fatal(err)
	}
	// data that is not a list of objects (a monitor event's object) gets
	// the top-level mutations only.
	var docs []object
	_ = json.Unmarshal(top["data"], &docs)
	with := func(edit func(top object, doc, md object)) []byte {
		t2 := object{}
		for k, v := range top {
			t2[k] = v
		}
		var doc, md object
		if len(docs) > 0 {
			doc = object{}
			for k, v := range docs[0] {
				doc[k] = v
			}
			md = object{}
			_ = json.Unmarshal(doc["metadata"], &md)
		}
		edit(t2, doc, md)
		if doc != nil {
			if md != nil {
				doc["metadata"] = mustJSON(md)
			}
			t2["data"] = mustJSON(append([]object{doc}, docs[1:]...))
		}
		return mustJSON(t2)
	}
	var out [][]byte
	for _, v := range values {
		v := json.RawMessage(v)
		for _, k := range topKeys {
			out = append(out, with(func(top, _, _ object) { top[k] = v }))
		}
		if len(docs) == 0 {
			continue
		}
		for _, k := range documentKeys {
			out = append(out, with(func(_, doc, md object) {
				doc[k] = v
				if k == "metadata" {
					clear(md)
					doc["metadata"] = v
				}
			}))
		}
		for _, k := range metadataKeys {
			out = append(out, with(func(_, _, md object) { md[k] = v }))
		}
		for parent, keys := range nestedKeys {
			for _, k := range keys {
				out = append(out, with(func(_, doc, _ object) { doc[parent] = mustJSON(object{k: v}) }))
			}
		}
		// The page's URL replaced by v, alone.
		out = append(out, with(func(_, _, md object) {
			delete(md, "url")
			md["sourceURL"] = v
		}))
	}
	out = append(out,
		with(func(top, _, _ object) { top["data"] = json.RawMessage(`[]`) }),
		with(func(top, _, _ object) { top["data"] = json.RawMessage(`[{}]`) }),
		with(func(top, _, _ object) {
			top["data"] = json.RawMessage(`[{"metadata":{"url":"https://x/1"}},{"metadata":{"sourceURL":"https://x/2"}}]`)
		}),
		with(func(top, _, _ object) { top["success"] = json.RawMessage(`false`); top["data"] = json.RawMessage(`[]`) }),
		with(func(top, _, _ object) {
			top["success"] = json.RawMessage(`false`)
			top["data"] = json.RawMessage(`[{},{"metadata":[]}]`)
		}),
	)
	return out
}

// hostileSeeds are the mutations, with values, of a successful page, a
// failed page, a crawl.completed, a page of a sender that sent no
// webhookId, a v0 failed page (jobId), monitor events with data an object
// and a list, an extract.completed, and (all true) a page answered 404.
func hostileSeeds(tb testing.TB, values []string, all bool) [][]byte {
	tb.Helper()
	names := []string{
		"../../testdata/fixtures/crawl-page.json",
		"../../testdata/fixtures/crawl-page-failed.json",
		"../../testdata/fixtures/crawl-completed.json",
		"../../testdata/fixtures/firecrawl-2025-10/0002-crawl.page.body",
		"../../testdata/fixtures/firecrawl-v0/0002-crawl.page.body",
		"../../testdata/fixtures/firecrawl-monitor/0001-monitor.page.body",
		"../../testdata/fixtures/firecrawl-monitor/0004-monitor.page.body",
		"../../testdata/fixtures/firecrawl-extract/0002-extract.completed.body",
	}
	if all {
		names = append(names, "../../testdata/fixtures/firecrawl-2026/run1/0042-crawl.page.body")
	}
	var out [][]byte
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, hostileMutations(tb, b, values)...)
	}
	return out
}

// FuzzAcceptedIsArchived: every body the receiver's validation accepts, the
// sink's decoding and row mapping archive (checkArchived). Seeded with the
// real deliveries and with wrong types in every known field
// (go test -fuzz FuzzAcceptedIsArchived ./internal/archive).
func FuzzAcceptedIsArchived(f *testing.F) {
	for _, b := range fixtureBodies(f) {
		f.Add(b)
	}
	for _, b := range hostileSeeds(f, fewWrongValues, false) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkArchived(t, body) })
}

// TestHostileSeedsAreAccepted: the mutations are mostly accepted, so that
// the fuzz target's seeds exercise the sink rather than Validate's refusals,
// and every fixture is accepted and archived.
func TestHostileSeedsAreAccepted(t *testing.T) {
	t.Parallel()
	for i, b := range fixtureBodies(t) {
		if ok, _ := checkArchived(t, b); !ok {
			t.Errorf("fixture %d refused", i)
		}
	}
	seeds := hostileSeeds(t, wrongValues, true)
	accepted := 0
	for _, b := range seeds {
		if ok, _ := checkArchived(t, b); ok {
			accepted++
		}
	}
	t.Logf("%d of %d hostile seeds accepted", accepted, len(seeds))
	if accepted < len(seeds)*3/4 {
		t.Errorf("%d of %d hostile seeds accepted, want most", accepted, len(seeds))
	}
}

// TestHostileDeliveriesInClickHouse: the rows the sink makes of every
// accepted hostile body go into the real ClickHouse, and read back under
// FINAL they are those rows. Each body gets a crawl of its own so that no
// two collapse.
func TestHostileDeliveriesInClickHouse(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()

	var all archive.Rows
	for i, b := range hostileSeeds(t, wrongValues, true) {
		ok, r := checkArchived(t, b)
		if !ok {
			continue
		}
		crawl := uuid.MustParse(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		for j := range r.Pages {
			r.Pages[j].CrawlID = crawl
		}
		for j := range r.Failures {
			r.Failures[j].CrawlID = crawl
		}
		for j := range r.CrawlEvents {
			r.CrawlEvents[j].CrawlID = crawl
		}
		for j := range r.RawEvents {
			r.RawEvents[j].JobID = crawl.String()
		}
		for j := range r.MonitorPages {
			r.MonitorPages[j].CheckID = crawl.String()
		}
		all.Add(r)
	}
	if len(all.Pages) == 0 || len(all.Failures) == 0 || len(all.CrawlEvents) == 0 || len(all.RawEvents) == 0 || len(all.MonitorPages) == 0 {
		t.Fatalf("rows %d/%d/%d/%d/%d: the seeds should make all five kinds",
			len(all.Pages), len(all.Failures), len(all.CrawlEvents), len(all.RawEvents), len(all.MonitorPages))
	}
	t.Logf("inserting %d pages, %d failures, %d crawl events", len(all.Pages), len(all.Failures), len(all.CrawlEvents))
	if err := w.Insert(ctx, all); err != nil {
		t.Fatalf("ClickHouse refused the rows of accepted deliveries: %v", err)
	}

	var pages []archive.Page
	rows, err := conn.Query(ctx, "SELECT crawl_id, job_kind, url, scrape_id, webhook_id, origin, success, status_code, title, markdown, html, error, document, webhook_metadata, received_at FROM "+cfg.Database+".pages FINAL")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p archive.Page
		var doc, md string
		if err := rows.Scan(&p.CrawlID, &p.JobKind, &p.URL, &p.ScrapeID, &p.WebhookID, &p.Origin, &p.Success, &p.StatusCode, &p.Title, &p.Markdown, &p.HTML, &p.Error, &doc, &md, &p.ReceivedAt); err != nil {
			t.Fatal(err)
		}
		p.Document = []byte(doc)
		if md != "" {
			p.WebhookMetadata = []byte(md)
		}
		p.ReceivedAt = p.ReceivedAt.UTC()
		pages = append(pages, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	byKey := func(ps []archive.Page) {
		sort.Slice(ps, func(i, j int) bool {
			if ps[i].CrawlID != ps[j].CrawlID {
				return ps[i].CrawlID.String() < ps[j].CrawlID.String()
			}
			return ps[i].URL < ps[j].URL
		})
	}
	want := append([]archive.Page(nil), all.Pages...)
	byKey(want)
	byKey(pages)
	if len(pages) != len(want) {
		t.Fatalf("%d pages read back, %d inserted", len(pages), len(want))
	}
	for i := range want {
		if !pages[i].ReceivedAt.Equal(want[i].ReceivedAt) {
			t.Fatalf("page %s %q received_at %v, want %v", want[i].CrawlID, want[i].URL, pages[i].ReceivedAt, want[i].ReceivedAt)
		}
		pages[i].ReceivedAt, want[i].ReceivedAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(pages[i], want[i]) {
			t.Fatalf("page read back\n got %+v\nwant %+v", pages[i], want[i])
		}
	}

	var failures []archive.Failure
	frows, err := conn.Query(ctx, "SELECT crawl_id, job_kind, webhook_id, url, status_code, error, reason, webhook_metadata, received_at FROM "+cfg.Database+".failures FINAL")
	if err != nil {
		t.Fatal(err)
	}
	for frows.Next() {
		var f archive.Failure
		var md string
		if err := frows.Scan(&f.CrawlID, &f.JobKind, &f.WebhookID, &f.URL, &f.StatusCode, &f.Error, &f.Reason, &md, &f.ReceivedAt); err != nil {
			t.Fatal(err)
		}
		if md != "" {
			f.WebhookMetadata = []byte(md)
		}
		f.ReceivedAt = time.Time{} // all the same; compared through pages
		failures = append(failures, f)
	}
	if err := frows.Err(); err != nil {
		t.Fatal(err)
	}
	frows.Close()
	fkey := func(fs []archive.Failure) {
		sort.Slice(fs, func(i, j int) bool {
			if fs[i].CrawlID != fs[j].CrawlID {
				return fs[i].CrawlID.String() < fs[j].CrawlID.String()
			}
			return fs[i].URL < fs[j].URL
		})
	}
	// The table's key is (crawl_id, webhook_id, url): two failed documents
	// of one event without a URL are one row, the last.
	type fk struct {
		crawl, webhook uuid.UUID
		url            string
	}
	last := map[fk]archive.Failure{}
	for _, f := range all.Failures {
		f.ReceivedAt = time.Time{}
		last[fk{f.CrawlID, f.WebhookID, f.URL}] = f
	}
	var wantF []archive.Failure
	for _, f := range last {
		wantF = append(wantF, f)
	}
	fkey(wantF)
	fkey(failures)
	if !reflect.DeepEqual(failures, wantF) {
		t.Fatalf("failures read back: %d rows, inserted %d; first difference in\n got %+v\nwant %+v", len(failures), len(wantF), failures, wantF)
	}

	var nEvents uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+cfg.Database+".crawl_events FINAL").Scan(&nEvents); err != nil {
		t.Fatal(err)
	}
	if int(nEvents) != len(all.CrawlEvents) {
		t.Errorf("crawl_events read back %d, inserted %d", nEvents, len(all.CrawlEvents))
	}

	// Raw events: each read back whole, under its job id and type.
	wantRaw := map[string]archive.RawEvent{}
	for _, e := range all.RawEvents {
		wantRaw[e.JobID+" "+e.Type+" "+e.WebhookID.String()] = e
	}
	erows, err := conn.Query(ctx, "SELECT job_id, type, toString(webhook_id), success, error, event FROM "+cfg.Database+".events FINAL")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for erows.Next() {
		var job, typ, wid, errText, event string
		var success bool
		if err := erows.Scan(&job, &typ, &wid, &success, &errText, &event); err != nil {
			t.Fatal(err)
		}
		n++
		e, ok := wantRaw[job+" "+typ+" "+wid]
		if !ok || e.Success != success || e.Error != errText || string(e.Event) != event {
			t.Fatalf("events row %s %s %s read back as not inserted (found %v)", job, typ, wid, ok)
		}
	}
	erows.Close()
	if n != len(wantRaw) {
		t.Errorf("events read back %d, inserted %d", n, len(wantRaw))
	}
	var nMonitor uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+cfg.Database+".monitor_pages FINAL").Scan(&nMonitor); err != nil {
		t.Fatal(err)
	}
	if int(nMonitor) == 0 || int(nMonitor) > len(all.MonitorPages) {
		t.Errorf("monitor_pages read back %d, inserted %d", nMonitor, len(all.MonitorPages))
	}
}
