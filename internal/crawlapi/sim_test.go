package crawlapi_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
)

// The simulator's 429 has no Retry-After and names its wait in the error
// text, as the API's does: the client waits that long, not its backoff (a
// millisecond here), and then reads the page.
func TestThrottledBySimulator(t *testing.T) {
	t.Parallel()
	c, err := crawlsim.NewCrawl(crawlsim.Options{Pages: 5})
	if err != nil {
		t.Fatal(err)
	}
	c.Finish(crawlapi.StatusCompleted)
	api := crawlsim.NewAPI(crawlsim.APIOptions{Key: crawlapi.TestKey, ThrottleReads: 1, RetryAfter: 2 * time.Second})
	api.Add(c)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := crawlapi.NewTestClient(t, srv.URL, nil)
	waits := crawlapi.RecordWaits(client, false)
	page, err := client.Get(context.Background(), c.ID, crawlapi.JobRef(events.KindCrawl, c.ID))
	if err != nil || len(page.Data) != 5 {
		t.Fatalf("page %+v, %v", page, err)
	}
	if got := waits(); len(got) != 1 || got[0] != 2*time.Second {
		t.Fatalf("waits %v, the 429 said 2s", got)
	}
	if c.Reads() != 2 {
		t.Fatalf("%d reads", c.Reads())
	}
}
