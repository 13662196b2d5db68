package events

import "testing"

// Event types name their job's kind and which of them end it; a type of no
// known kind is a crawl's for the archive and no kind at all to learn.
func TestKinds(t *testing.T) {
	t.Parallel()
	for typ, want := range map[string]struct {
		kind     string
		terminal bool
	}{
		"crawl.page": {KindCrawl, false}, "crawl.completed": {KindCrawl, true}, "crawl.failed": {KindCrawl, true},
		"crawl.cancelled": {KindCrawl, true}, "batch_scrape.page": {KindBatchScrape, false},
		"batch_scrape.completed": {KindBatchScrape, true}, "batch_scrape.cancelled": {KindBatchScrape, true},
		"extract.completed": {"", false}, "crawl": {"", false}, "": {"", false},
	} {
		if KindOf(typ) != want.kind || EndsJob(typ) != want.terminal {
			t.Errorf("%q: kind %q terminal %v", typ, KindOf(typ), EndsJob(typ))
		}
		if jk := JobKind(typ); (want.kind != "" && jk != want.kind) || (want.kind == "" && jk != KindCrawl) {
			t.Errorf("%q: JobKind %q", typ, jk)
		}
	}
}

// A job's kind reads as a person words it; an unknown kind reads as a
// crawl, as JobKind files it.
func TestKindNoun(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]string{KindCrawl: "crawl", KindBatchScrape: "batch scrape", "": "crawl", "extract": "crawl"} {
		if got := KindNoun(kind); got != want {
			t.Errorf("KindNoun(%q) = %q, want %q", kind, got, want)
		}
	}
}
