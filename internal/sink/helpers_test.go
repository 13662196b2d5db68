package sink_test

import (
	"fmt"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
)

// The benchmarks use ClickHouse (see clickhousetest.RunMain).
func TestMain(m *testing.M) { clickhousetest.RunMain(m) }

// pageBody is a successful crawl.page delivery.
func pageBody(crawl, webhook, url, markdown string) []byte {
	return fmt.Appendf(nil, `{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%q,"metadata":{"title":"T %s","sourceURL":%q,"url":%q,"statusCode":200,"scrapeId":%q}}],"metadata":{"tenant":"acme"}}`,
		crawl, webhook, markdown, url, url, url, uuid.NewString())
}
