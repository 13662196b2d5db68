package backfill

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"

	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
)

const testKey = "sk-test-0123456789"

// startSim serves crawls with the crawl simulator, the stand-in of the real
// API, on a loopback port.
func startSim(t *testing.T, o crawlsim.APIOptions, crawls ...*crawlsim.Crawl) *httptest.Server {
	t.Helper()
	if o.Key == "" {
		o.Key = testKey
	}
	api := crawlsim.NewAPI(o)
	for _, c := range crawls {
		api.Add(c)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return srv
}

func simCrawl(t *testing.T, o crawlsim.Options) *crawlsim.Crawl {
	t.Helper()
	c, err := crawlsim.NewCrawl(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newTestClient(t *testing.T, base string, mod func(*crawlapi.ClientConfig)) *crawlapi.Client {
	t.Helper()
	log, _ := logtest.WithoutSecret(t, testKey)
	cfg := crawlapi.ClientConfig{BaseURL: base, Key: testKey, MinBackoff: time.Millisecond, MaxBackoff: 3 * time.Second,
		NotFoundWait: time.Millisecond, Attempts: 5}
	if mod != nil {
		mod(&cfg)
	}
	c, err := crawlapi.NewClient(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// collect walks a crawl and returns the URLs read, failing on a URL read
// twice.
func collect(t *testing.T, p *Pager, crawlID, cursor string, seen map[string]int) (Walk, error) {
	t.Helper()
	return p.Walk(context.Background(), crawlID, cursor, func(_ context.Context, c Chunk) error {
		for _, d := range c.Docs {
			seen[d.Metadata.PageURL()]++
			if len(d.Raw) == 0 || d.Metadata.ScrapeID == "" {
				return fmt.Errorf("document without raw JSON or scrapeId: %s", d.Raw)
			}
		}
		return nil
	})
}

func TestWalkManyChunks(t *testing.T) {
	t.Parallel()
	c := simCrawl(t, crawlsim.Options{Pages: 250, Faults: crawlsim.Faults{Failures: 0.1}})
	c.Finish(crawlapi.StatusCompleted)
	srv := startSim(t, crawlsim.APIOptions{PageDocs: 7}, c)
	seen := map[string]int{}
	w, err := collect(t, NewPager(newTestClient(t, srv.URL, nil), 0), c.ID, "", seen)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Finished || w.Cursor != "" || w.Requests != 36 || w.Docs != 225 || w.Status != crawlapi.StatusCompleted {
		t.Fatalf("walk %+v", w)
	}
	for _, u := range c.SuccessfulURLs() {
		if seen[u] != 1 {
			t.Fatalf("%s read %d times", u, seen[u])
		}
	}
}

// A cancelled or failed crawl keeps next present; the walk stops at the
// first empty page.
func TestWalkStopsOnTerminalEmptyPage(t *testing.T) {
	t.Parallel()
	c := simCrawl(t, crawlsim.Options{Pages: 20})
	c.Scrape(20)
	c.Finish(crawlapi.StatusCancelled)
	srv := startSim(t, crawlsim.APIOptions{PageDocs: 10}, c)
	seen := map[string]int{}
	w, err := collect(t, NewPager(newTestClient(t, srv.URL, nil), 0), c.ID, "", seen)
	if err != nil || !w.Finished || len(seen) != 20 || w.Requests != 2 {
		t.Fatalf("walk %+v, %d urls, %v", w, len(seen), err)
	}
}

// A 429 is waited out and the walk goes on. (That the wait is the one the
// 429's text names is the client's: crawlapi's TestThrottledBySimulator.)
func TestWalk429ThenSuccess(t *testing.T) {
	t.Parallel()
	c := simCrawl(t, crawlsim.Options{Pages: 5})
	c.Finish(crawlapi.StatusCompleted)
	srv := startSim(t, crawlsim.APIOptions{ThrottleReads: 1, RetryAfter: 2 * time.Second}, c)
	client := newTestClient(t, srv.URL, func(c *crawlapi.ClientConfig) { c.MaxBackoff = time.Millisecond })
	seen := map[string]int{}
	w, err := collect(t, NewPager(client, 0), c.ID, "", seen)
	if err != nil || !w.Finished || len(seen) != 5 {
		t.Fatalf("walk %+v, %v", w, err)
	}
	if c.Reads() != 2 {
		t.Fatalf("%d reads", c.Reads())
	}
}

func TestWalk5xxRetriedThenGivesUp(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		fmt.Fprint(w, `{"success":true,"status":"completed","total":0,"completed":0,"data":[]}`)
	}))
	defer srv.Close()
	w, err := NewPager(newTestClient(t, srv.URL, nil), 0).Walk(context.Background(), "c", "", func(context.Context, Chunk) error { return nil })
	if err != nil || !w.Finished || n.Load() != 3 {
		t.Fatalf("%+v %v after %d requests", w, err, n.Load())
	}
	n.Store(-100)
	_, err = NewPager(newTestClient(t, srv.URL, nil), 0).Walk(context.Background(), "c", "", func(context.Context, Chunk) error { return nil })
	if !errors.Is(err, crawlapi.ErrUnavailable) || n.Load() != -95 {
		t.Fatalf("%v after %d requests", err, n.Load()+100)
	}
}

// A next link to another host is not followed: the key never reaches it.
// A next with the wrong scheme on our host is followed on our scheme.
func TestWalkRefusesForeignNext(t *testing.T) {
	t.Parallel()
	var foreign atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		foreign.Add(1)
		w.WriteHeader(500)
	}))
	defer other.Close()
	c := simCrawl(t, crawlsim.Options{Pages: 30})
	c.Finish(crawlapi.StatusCompleted)
	srv := startSim(t, crawlsim.APIOptions{PageDocs: 10, NextBase: other.URL}, c)
	log, _ := logtest.WithoutSecret(t, testKey)
	cl, _ := crawlapi.NewClient(crawlapi.ClientConfig{BaseURL: srv.URL, Key: testKey}, log)
	seen := map[string]int{}
	w, err := collect(t, NewPager(cl, 0), c.ID, "", seen)
	if !errors.Is(err, crawlapi.ErrForeignNext) || len(seen) != 10 || w.Requests != 1 {
		t.Fatalf("walk %+v, %v", w, err)
	}
	if foreign.Load() != 0 {
		t.Fatalf("the other host got %d requests", foreign.Load())
	}

	wrongScheme := simCrawl(t, crawlsim.Options{Pages: 30})
	wrongScheme.Finish(crawlapi.StatusCompleted)
	srv2 := startSim(t, crawlsim.APIOptions{PageDocs: 10}, wrongScheme)
	srv2API := crawlsim.NewAPI(crawlsim.APIOptions{Key: testKey, PageDocs: 10, NextBase: strings.Replace(srv2.URL, "http://", "https://", 1)})
	srv2API.Add(wrongScheme)
	srv2.Config.Handler = srv2API
	seen = map[string]int{}
	if w, err := collect(t, NewPager(newTestClient(t, srv2.URL, nil), 0), wrongScheme.ID, "", seen); err != nil || !w.Finished || len(seen) != 30 {
		t.Fatalf("wrong-scheme next: %+v %v", w, err)
	}
}

func TestWalkUnauthorized(t *testing.T) {
	t.Parallel()
	c := simCrawl(t, crawlsim.Options{Pages: 5})
	srv := startSim(t, crawlsim.APIOptions{Key: "another-key"}, c)
	_, err := NewPager(newTestClient(t, srv.URL, nil), 0).Walk(context.Background(), c.ID, "", func(context.Context, Chunk) error { return nil })
	if !errors.Is(err, crawlapi.ErrUnauthorized) || c.Reads() != 0 {
		t.Fatalf("%v", err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Fatal("the key is in the error")
	}
}

func TestWalkNotFound(t *testing.T) {
	t.Parallel()
	early := simCrawl(t, crawlsim.Options{Pages: 5})
	early.Finish(crawlapi.StatusCompleted)
	expired := simCrawl(t, crawlsim.Options{Pages: 5})
	expired.Finish(crawlapi.StatusCompleted)
	expired.Expire()
	srv := startSim(t, crawlsim.APIOptions{NotFoundReads: 2}, early, expired)
	p := NewPager(newTestClient(t, srv.URL, func(c *crawlapi.ClientConfig) { c.NotFoundRetries = 3 }), 0)

	seen := map[string]int{}
	if w, err := collect(t, p, early.ID, "", seen); err != nil || !w.Finished || len(seen) != 5 {
		t.Fatalf("early 404: %+v %v", w, err)
	}
	if _, err := collect(t, p, expired.ID, "", seen); !errors.Is(err, crawlapi.ErrNotFound) || expired.Reads() != 4 {
		t.Fatalf("expired: %v after %d reads", err, expired.Reads())
	}
}

// While the crawl is scraping, a walk stops at the empty page and a later
// walk from its cursor reads only what came since.
func TestWalkScrapingResumes(t *testing.T) {
	t.Parallel()
	c := simCrawl(t, crawlsim.Options{Pages: 50})
	c.Scrape(30)
	srv := startSim(t, crawlsim.APIOptions{PageDocs: 8}, c)
	p := NewPager(newTestClient(t, srv.URL, nil), 0)
	seen := map[string]int{}
	w, err := collect(t, p, c.ID, "", seen)
	if err != nil || w.Finished || w.Status != crawlapi.StatusScraping || len(seen) != 30 || !strings.HasSuffix(w.Cursor, "skip=30") {
		t.Fatalf("first walk %+v %v, %d urls", w, err, len(seen))
	}
	w, err = collect(t, p, c.ID, w.Cursor, seen)
	if err != nil || w.Finished || w.Requests != 1 || w.Docs != 0 {
		t.Fatalf("nothing new yet: %+v %v", w, err)
	}
	c.Finish(crawlapi.StatusCompleted)
	w, err = collect(t, p, c.ID, w.Cursor, seen)
	if err != nil || !w.Finished || w.Docs != 20 || len(seen) != 50 {
		t.Fatalf("last walk %+v %v", w, err)
	}
	for u, n := range seen {
		if n != 1 {
			t.Fatalf("%s read %d times", u, n)
		}
	}
}

// A misbehaving server cannot keep a walk going forever.
func TestWalkIsBounded(t *testing.T) {
	t.Parallel()
	doc := `{"markdown":"x","metadata":{"url":"https://e.com/","scrapeId":"s"}}`
	tests := []struct {
		name string
		next func(skip int) int
	}{
		{"next repeats", func(skip int) int { return skip }},
		{"next never ends", func(skip int) int { return skip + 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				var skip int
				fmt.Sscan(r.URL.Query().Get("skip"), &skip)
				fmt.Fprintf(w, `{"success":true,"status":"scraping","total":1,"next":"http://%s/v2/crawl/c?skip=%d","data":[%s]}`, r.Host, tc.next(skip), doc)
			}))
			defer srv.Close()
			_, err := NewPager(newTestClient(t, srv.URL, nil), 50).Walk(context.Background(), "c", "/v2/crawl/c?skip=0", func(context.Context, Chunk) error { return nil })
			if !errors.Is(err, ErrRunaway) || n.Load() > 50 {
				t.Fatalf("%v after %d requests", err, n.Load())
			}
		})
	}
}
