package sinkcmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
)

// TestStatus: a crawl that crawlsim ran, some of its pages failing and
// some never delivered, as `sink status` tells it: pages received,
// failures with their top error, the last event, and the crawl API's count
// compared with the archive's, which differs until backfill ran.
func TestStatus(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := newPublisher(t, e["NATS_URL"])
	c, err := crawlsim.NewCrawl(crawlsim.Options{Pages: 30, Seed: 11, Faults: crawlsim.Faults{Failures: 0.1, Drops: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	c.Finish(crawlapi.StatusCompleted)
	var delivered, failed, dropped int
	for _, pg := range c.Pages {
		if pg.Has(crawlsim.FaultDrop) {
			dropped++
			continue
		}
		p.publish(t, pg.Body)
		delivered++
		if !pg.Success {
			failed++
		}
	}
	if failed == 0 || dropped == 0 {
		t.Fatalf("seed gives %d failed and %d dropped pages; the test needs both", failed, dropped)
	}
	api := crawlsim.NewAPI(crawlsim.APIOptions{Key: "k"})
	api.Add(c)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	startSink(t, e, sinkcmd.Options{})
	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	waitFor(t, 2*time.Minute, "the crawl archived", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ?", c.ID) == uint64(delivered) &&
			clickhousetest.TryCount(conn, "SELECT count() FROM failures FINAL WHERE crawl_id = ?", c.ID) == uint64(failed) &&
			// The view's states are committed by the same insert as the
			// failures, but a reader can see one part before the other.
			clickhousetest.TryCount(conn, "SELECT failures FROM crawls WHERE crawl_id = ?", c.ID) == uint64(failed)
	})

	e["CRAWL_API_URL"], e["CRAWL_API_KEY"] = "http://"+ln.Addr().String(), "k"
	var out strings.Builder
	if err := sinkcmd.Run(context.Background(), []string{"sink", "status", c.ID}, e.get, &out, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	successful := delivered - failed
	completed := successful + dropped // the API's count: every successful scrape
	for _, want := range []string{
		"crawl " + c.ID,
		fmt.Sprintf("pages:       %d received by webhook, 0 backfilled", delivered),
		fmt.Sprintf("failures:    %d failed pages, 0 cancelled", failed),
		fmt.Sprintf("%6d  ", failed), // the failures' one error, counted
		"last event:  none",
		fmt.Sprintf("crawl API:   completed, %d pages completed; archive holds %d successful: differs by %d", completed, successful, dropped),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}

	// --json prints the read API's GET /v1/jobs/{id} body and the crawl
	// API's view.
	out.Reset()
	if err := sinkcmd.Run(context.Background(), []string{"sink", "status", c.ID, "--json"}, e.get, &out, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var st struct {
		reader.JobAnswer
		CrawlAPI struct {
			Status    string `json:"status"`
			Completed int    `json:"completed"`
			Agrees    bool   `json:"agrees"`
		} `json:"crawl_api"`
	}
	if err := json.Unmarshal([]byte(out.String()), &st); err != nil {
		t.Fatalf("sink status --json: %v\n%s", err, out.String())
	}
	if st.JobID != c.ID || st.Kind != "crawl" || st.PagesReceived != uint64(delivered) || st.Failures != uint64(failed) ||
		st.SuccessfulPages != uint64(successful) || len(st.TopErrors) != 1 || st.TopErrors[0].Pages != uint64(failed) ||
		st.CrawlAPI.Status != "completed" || st.CrawlAPI.Completed != completed || st.CrawlAPI.Agrees {
		t.Errorf("sink status --json: %+v", st)
	}

	var missing strings.Builder
	if err := sinkcmd.Run(context.Background(), []string{"sink", "status", "00000000-0000-4000-8000-000000000009"}, e.get, &missing, &missing); err == nil || !strings.Contains(err.Error(), "nothing of job") {
		t.Fatalf("a job the archive never saw: %v", err)
	}
}

// TestStatusHostileText: a failed page whose error carries escape
// sequences and a bidi override, and a crawl API whose status does too:
// `sink status` prints them with no control or format character left.
func TestStatusHostileText(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := newPublisher(t, e["NATS_URL"])
	crawl := "0190a4c6-7f3e-7a4c-9b2d-5e8f1a2b3c4d"
	hostile := "boom\u001b[2J\u001b]8;;https://evil.test/\u0007click\u009b31m\u202Eexe.txt\r\nforged line"
	body, _ := json.Marshal(map[string]any{
		"success": false, "type": "crawl.page", "id": crawl, "webhookId": "3b2f1c9e-8d7a-4c6b-9e5f-0a1b2c3d4e5f",
		"data": []any{map[string]any{"metadata": map[string]any{"sourceURL": "https://site.test/x"}}}, "error": hostile,
	})
	p.publish(t, body)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		status, _ := json.Marshal("completed\u001b[1A\u202E")
		fmt.Fprintf(w, `{"success":true,"status":%s,"completed":0,"total":1,"creditsUsed":1,"data":[]}`, status)
	}))
	t.Cleanup(api.Close)

	startSink(t, e, sinkcmd.Options{})
	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	waitFor(t, 2*time.Minute, "the failure archived", func() bool {
		return clickhousetest.TryCount(conn, "SELECT failures FROM crawls WHERE crawl_id = ?", crawl) == 1
	})
	e["CRAWL_API_URL"], e["CRAWL_API_KEY"] = api.URL, "k"
	var out strings.Builder
	if err := sinkcmd.Run(context.Background(), []string{"sink", "status", crawl}, e.get, &out, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, c := range out.String() {
		if c != '\n' && (unicode.IsControl(c) || unicode.Is(unicode.Cf, c)) {
			t.Fatalf("status prints U+%04X:\n%q", c, out.String())
		}
	}
	for _, want := range []string{"boom\uFFFD[2J", "forged line", "crawl API:   completed\uFFFD[1A\uFFFD, 0 pages completed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Count(out.String(), "\n") != 8 {
		t.Errorf("the error's newline made a line of its own:\n%s", out.String())
	}
}
