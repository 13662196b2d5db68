package crawlsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Crawl statuses, as the API reports them.
const (
	StatusScraping  = "scraping"
	StatusCompleted = "completed"
	StatusCancelled = "cancelled"
	StatusFailed    = "failed"
)

// Fault names, as they appear in a Report.
const (
	FaultDuplicate    = "duplicate"
	FaultDrop         = "drop"
	FaultFail         = "fail"
	FaultBadSignature = "bad_signature"
	FaultOversized    = "oversized"
)

// Faults chooses which pages of a crawl misbehave. Each rate is the fraction
// of pages (0..1) given that fault; the pages are picked by the crawl's seed,
// so a run is reproducible, and the counts are exact (rate × pages, rounded).
// A page has at most one of drop, fail and bad signature; duplicates and
// oversized pages combine with the others.
type Faults struct {
	// Duplicates: the page is delivered twice with the same webhookId, as
	// when the sender retries after a lost answer.
	Duplicates float64
	// Drops: the page is never delivered; only backfill finds it.
	Drops float64
	// Failures: the page failed to scrape; it is delivered with
	// success:false and an error, and is absent from the status endpoint.
	Failures float64
	// BadSignatures: the delivery is signed with a wrong secret.
	BadSignatures float64
	// Oversized: the page's markdown is OversizeBytes long.
	Oversized float64
	// OversizeBytes is the markdown size of an oversized page (default 3 MB,
	// more than one NATS message holds).
	OversizeBytes int
}

// Options describe a simulated crawl.
type Options struct {
	// ID is the crawl id; a random UUID when empty.
	ID string
	// Pages is the number of pages the crawl scrapes.
	Pages int
	// PageBytes is the approximate markdown size of a page (default 2048).
	PageBytes int
	// Site is the origin the page URLs are under (default https://example.com).
	Site string
	// Metadata is the webhook's custom metadata, echoed in every delivery;
	// default {"tenant":"crawlsim"}.
	Metadata json.RawMessage
	// Faults chooses misbehaving pages.
	Faults Faults
	// Seed makes page content, ids and fault choice reproducible; 0 picks
	// one at random.
	Seed uint64
}

// Page is one page of a simulated crawl.
type Page struct {
	// Index is the page's position in scrape order.
	Index int
	// URL is the page's metadata.url (equal to its sourceURL).
	URL string
	// ScrapeID is metadata.scrapeId; empty for failed pages.
	ScrapeID string
	// WebhookID is the id of the page's crawl.page delivery.
	WebhookID string
	// Success is false for failed pages.
	Success bool
	// Error is the failure reason of a failed page.
	Error string
	// Faults lists the faults applied to the page (Fault* names).
	Faults []string

	// Body is the crawl.page delivery, byte for byte.
	Body []byte
	// doc is the page's Document as the status endpoint returns it; nil for
	// failed pages (data holds successful pages only).
	doc json.RawMessage
}

// Has reports whether the page has fault f.
func (p *Page) Has(f string) bool {
	for _, x := range p.Faults {
		if x == f {
			return true
		}
	}
	return false
}

// Crawl is a simulated crawl: its pages and the state the status endpoint
// reports. Pages become visible to the status endpoint in index order as
// they are scraped (Scrape), which the Sender does as it delivers them.
// A Crawl is safe for concurrent use.
type Crawl struct {
	ID       string
	Pages    []*Page
	Metadata json.RawMessage

	mu        sync.Mutex
	scraped   int
	status    string
	expiresAt time.Time
	expired   bool
	reads     int
}

// NewCrawl builds a crawl's pages and deliveries. The crawl starts in status
// scraping with no page scraped.
func NewCrawl(o Options) (*Crawl, error) {
	if o.Pages < 0 {
		return nil, errors.New("crawlsim: pages must not be negative")
	}
	if o.PageBytes <= 0 {
		o.PageBytes = 2048
	}
	if o.Site == "" {
		o.Site = "https://example.com"
	}
	o.Site = strings.TrimSuffix(o.Site, "/")
	if o.Metadata == nil {
		o.Metadata = json.RawMessage(`{"tenant":"crawlsim"}`)
	}
	if o.Faults.OversizeBytes <= 0 {
		o.Faults.OversizeBytes = 3 << 20
	}
	for name, r := range map[string]float64{"duplicates": o.Faults.Duplicates, "drops": o.Faults.Drops,
		"failures": o.Faults.Failures, "bad signatures": o.Faults.BadSignatures, "oversized": o.Faults.Oversized} {
		if r < 0 || r > 1 {
			return nil, fmt.Errorf("crawlsim: %s rate %v is not within 0..1", name, r)
		}
	}
	if o.Faults.Drops+o.Faults.Failures+o.Faults.BadSignatures > 1 {
		return nil, errors.New("crawlsim: drops + failures + bad signatures exceed 1")
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	newID := func() string {
		id, _ := uuid.NewRandomFromReader(rngReader{rng})
		return id.String()
	}
	if o.ID == "" {
		o.ID = newID()
	} else if _, err := uuid.Parse(o.ID); err != nil {
		return nil, fmt.Errorf("crawlsim: crawl id %q is not a UUID", o.ID)
	}

	faults := make([][]string, o.Pages)
	// One permutation for the exclusive faults, so a page gets at most one.
	perm := rng.Perm(o.Pages)
	at := 0
	for _, f := range []struct {
		name string
		rate float64
	}{{FaultDrop, o.Faults.Drops}, {FaultFail, o.Faults.Failures}, {FaultBadSignature, o.Faults.BadSignatures}} {
		n := count(f.rate, o.Pages)
		for _, i := range perm[at : at+n] {
			faults[i] = append(faults[i], f.name)
		}
		at += n
	}
	for _, f := range []struct {
		name string
		rate float64
	}{{FaultDuplicate, o.Faults.Duplicates}, {FaultOversized, o.Faults.Oversized}} {
		for _, i := range rng.Perm(o.Pages)[:count(f.rate, o.Pages)] {
			faults[i] = append(faults[i], f.name)
		}
	}

	c := &Crawl{ID: o.ID, Metadata: o.Metadata, status: StatusScraping}
	for i := range o.Pages {
		p := &Page{Index: i, URL: fmt.Sprintf("%s/page/%d", o.Site, i), WebhookID: newID(), Success: true, Faults: faults[i]}
		var err error
		if p.Has(FaultFail) {
			p.Success = false
			p.Error = "Request failed with status code 502"
			var d failedDocument
			d.Metadata.SourceURL = p.URL
			raw, _ := marshal(d)
			p.Body, err = encodeEvent(false, "crawl.page", c.ID, p.WebhookID, []json.RawMessage{raw}, p.Error, c.Metadata)
		} else {
			p.ScrapeID = newID()
			size := o.PageBytes
			if p.Has(FaultOversized) {
				size = o.Faults.OversizeBytes
			}
			md := markdown(rng, i, size)
			doc := wireDocument{Markdown: md, Metadata: wireMetadata{
				Title: fmt.Sprintf("Page %d", i), Language: "en", SourceURL: p.URL, URL: p.URL,
				StatusCode: 200, ContentType: "text/html; charset=UTF-8", ScrapeID: p.ScrapeID,
				ProxyUsed: "basic", CacheState: "miss", CreditsUsed: 1,
			}}
			delivered, _ := marshal(doc)
			doc.Metadata.ContentType = ""
			p.doc, _ = marshal(doc)
			p.Body, err = encodeEvent(true, "crawl.page", c.ID, p.WebhookID, []json.RawMessage{delivered}, "", c.Metadata)
		}
		if err != nil {
			return nil, fmt.Errorf("crawlsim: encode page %d: %w", i, err)
		}
		c.Pages = append(c.Pages, p)
	}
	return c, nil
}

func count(rate float64, n int) int {
	k := int(rate*float64(n) + 0.5)
	return min(k, n)
}

// Scrape makes the pages up to index n (exclusive) visible to the status
// endpoint. It never hides pages already scraped.
func (c *Crawl) Scrape(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scraped = max(c.scraped, min(n, len(c.Pages)))
}

// Finish sets a terminal status. Completing a crawl scrapes all its pages.
func (c *Crawl) Finish(status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if status == StatusCompleted {
		c.scraped = len(c.Pages)
	}
	c.status = status
}

// Expire makes the crawl's results expire: the status endpoint answers 404.
func (c *Crawl) Expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expired = true
}

// Status returns the crawl's status.
func (c *Crawl) Status() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Reads is the number of status requests the crawl answered or refused.
func (c *Crawl) Reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// SuccessfulURLs returns the URLs of the pages that scraped successfully:
// what the archive must hold once backfill has run.
func (c *Crawl) SuccessfulURLs() []string {
	var out []string
	for _, p := range c.Pages {
		if p.Success {
			out = append(out, p.URL)
		}
	}
	return out
}

// eventBody returns a crawl-level delivery (crawl.started, crawl.completed):
// data is [] as from the real sender.
func (c *Crawl) eventBody(typ, webhookID string) ([]byte, error) {
	return encodeEvent(true, typ, c.ID, webhookID, nil, "", c.Metadata)
}

var words = strings.Fields(`crawl page archive search index token batch stream
signature delivery webhook replica lease cursor chunk status backfill document
markdown title scrape engine query result metric alert failure retry window`)

// markdown returns about size bytes of page text. The words are drawn at
// random so that oversized pages do not compress to nothing.
func markdown(rng *rand.Rand, i, size int) string {
	var b strings.Builder
	b.Grow(size + 16)
	fmt.Fprintf(&b, "# Page %d\n\n", i)
	for b.Len() < size {
		b.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(12) == 0 {
			b.WriteString(".\n\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// rngReader adapts a seeded generator to io.Reader for reproducible UUIDs.
type rngReader struct{ r *rand.Rand }

func (r rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}
