package events

import "strings"

// Job kinds: a crawl (POST /v2/crawl) or a batch scrape (POST
// /v2/batch/scrape). Both send the same events under their own prefix, and
// both are archived alike; the kind tells them apart in queries and tells
// the backfill which status endpoint to read.
const (
	KindCrawl       = "crawl"
	KindBatchScrape = "batch_scrape"
)

// KindNoun is how a job of kind reads to a person, in alerts and change
// summaries: "batch scrape" for KindBatchScrape, "crawl" for KindCrawl and
// for any other kind (as JobKind files unknown types under crawl).
func KindNoun(kind string) string {
	if kind == KindBatchScrape {
		return "batch scrape"
	}
	return "crawl"
}

// A job's kind (KindCrawl, KindBatchScrape) is the prefix of its event
// types: crawl.page, batch_scrape.completed. A type that neither prefixes
// is read two ways, each under its own name: JobKind files the delivery's
// rows under crawl (the API has only ever sent such types for crawls),
// while KindOf answers "", so that the backfill, which keeps a job's kind
// to pick its endpoints, learns nothing from a type it does not know.

// JobKind is the kind of job an event of type t belongs to: batch_scrape for
// "batch_scrape.*", crawl for everything else (crawl.* and unknown types,
// which the API has only ever sent for crawls).
func JobKind(t string) string {
	if strings.HasPrefix(t, KindBatchScrape+".") {
		return KindBatchScrape
	}
	return KindCrawl
}

// KindOf returns the kind an event type's prefix names ("crawl.page" →
// KindCrawl, "batch_scrape.completed" → KindBatchScrape), or "" for any
// other type.
func KindOf(eventType string) string {
	prefix, _, ok := strings.Cut(eventType, ".")
	if ok && (prefix == KindCrawl || prefix == KindBatchScrape) {
		return prefix
	}
	return ""
}

// EndsJob reports whether an event type ends its job: completed, failed or
// cancelled, of a crawl or a batch scrape.
func EndsJob(eventType string) bool {
	if KindOf(eventType) == "" {
		return false
	}
	_, event, _ := strings.Cut(eventType, ".")
	return event == "completed" || event == "failed" || event == "cancelled"
}
