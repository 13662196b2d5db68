package crawlsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// Fault names, as they appear in a Report.
const (
	FaultDuplicate    = "duplicate"
	FaultDrop         = "drop"
	FaultFail         = "fail"
	FaultBadSignature = "bad_signature"
	FaultOversized    = "oversized"
	// FaultCancelled marks a page still queued when its job was cancelled:
	// it is delivered as a failure with CancelledError.
	FaultCancelled = "cancelled"
)

// CancelledError is the real API's error for a scrape its parent job's
// cancellation stopped, in the failed page delivery and in the errors
// endpoint.
const CancelledError = "This scrape was not completed because the parent crawl or batch scrape was cancelled. This happens when you call the cancel endpoint on a crawl or batch scrape, or when the operation is stopped for another reason. Any URLs that were already scraped before cancellation are still available in the results."

// FailedError and FailedCode are the error (and the errors endpoint's
// code) of a page with fault fail.
const (
	FailedError = "Request failed with status code 502"
	FailedCode  = "SCRAPE_SITE_ERROR"
)

// Faults chooses which pages of a crawl misbehave. Each rate is the fraction
// of pages (0..1) given that fault; the pages are picked by the crawl's seed,
// so a run is reproducible, and the counts are exact (rate × pages, rounded).
// A page has at most one of drop, fail, dropped failure and bad signature;
// duplicates and oversized pages combine with the others.
type Faults struct {
	// Duplicates: the page is delivered twice with the same webhookId, as
	// when the sender retries after a lost answer.
	Duplicates float64
	// Drops: the page is never delivered; only backfill finds it.
	Drops float64
	// Failures: the page failed to scrape; it is delivered with
	// success:false and an error, and is absent from the status endpoint.
	Failures float64
	// DroppedFailures: the page failed to scrape and its failed delivery is
	// never sent; only the errors endpoint lists it.
	DroppedFailures float64
	// BadSignatures: the delivery is signed with a wrong secret.
	BadSignatures float64
	// Oversized: the page's markdown is OversizeBytes long.
	Oversized float64
	// OversizeBytes is the markdown size of an oversized page (default 3 MB,
	// more than one NATS message holds).
	OversizeBytes int
}

// Options describe a simulated crawl or batch scrape (a job).
type Options struct {
	// ID is the job id; a random UUID when empty.
	ID string
	// Kind is events.KindCrawl (default) or events.KindBatchScrape: the
	// prefix of the job's event types (crawl.page, batch_scrape.page…) and
	// the path of its status and errors endpoints (crawlapi.JobRef).
	Kind string
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
	// RobotsBlocked is the number of URLs robots.txt kept the job from
	// scraping: never delivered, absent from the status, listed only under
	// robotsBlocked by the errors endpoint.
	RobotsBlocked int
	// Cancel cancels the job once CancelAfter pages are scraped: every
	// page after those is delivered as a failure with CancelledError, the
	// status becomes cancelled, and the last event is <kind>.cancelled
	// instead of <kind>.completed.
	Cancel      bool
	CancelAfter int
	// Seed makes page content, ids and fault choice reproducible; 0 picks
	// one at random.
	Seed uint64
	// Now is the clock of the errors endpoint's timestamps (default
	// time.Now).
	Now func() time.Time
	// Recrawl, when set, makes the job a later crawl of an earlier job's
	// site, with edits (see Recrawl).
	Recrawl *Recrawl
	// HTML puts each scraped page's html in its Document beside the
	// markdown: its text and a link to every page of the job (pageHTML).
	HTML bool
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
	// Error is the failure reason of a failed page; Code the errors
	// endpoint's code for it ("" when the API gives none).
	Error string
	Code  string
	// Faults lists the faults applied to the page (Fault* names).
	Faults []string

	// Body is the page delivery (crawl.page or batch_scrape.page), byte
	// for byte.
	Body []byte
	// jobID is the scrape job's id, the errors endpoint's id of a failure.
	jobID string
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

// Crawl is a simulated job, a crawl or a batch scrape: its pages and the
// state the status and errors endpoints report. Pages become visible to
// them in index order as they are scraped (Scrape), which the Sender does as
// it delivers them. A Crawl is safe for concurrent use.
type Crawl struct {
	ID       string
	Kind     string
	Pages    []*Page
	Metadata json.RawMessage
	// RobotsBlocked are the URLs robots.txt kept the job from scraping.
	RobotsBlocked []string
	// CancelAt is the index of the first page the cancellation stopped, or
	// -1 when the job is not cancelled.
	CancelAt int

	now       func() time.Time
	mu        sync.Mutex
	scraped   int
	scrapedAt []time.Time
	status    string
	expiresAt time.Time
	expired   bool
	reads     int
	// errorReads counts the errors endpoint's requests, apart from reads
	// so that Reads keeps meaning status pages.
	errorReads int
	// links are the URLs every page's html links (Options.HTML); nil: no
	// html.
	links []string
}

// NewCrawl builds a crawl's pages and deliveries. The crawl starts in status
// scraping with no page scraped.
func NewCrawl(o Options) (*Crawl, error) {
	if o.Recrawl != nil {
		return newRecrawl(o)
	}
	if o.Pages < 0 {
		return nil, errors.New("crawlsim: pages must not be negative")
	}
	if o.Kind == "" {
		o.Kind = events.KindCrawl
	}
	if o.Kind != events.KindCrawl && o.Kind != events.KindBatchScrape {
		return nil, fmt.Errorf("crawlsim: kind %q is neither %s nor %s", o.Kind, events.KindCrawl, events.KindBatchScrape)
	}
	if o.RobotsBlocked < 0 {
		return nil, errors.New("crawlsim: robots-blocked URLs must not be negative")
	}
	if o.Cancel && (o.CancelAfter < 0 || o.CancelAfter > o.Pages) {
		return nil, fmt.Errorf("crawlsim: cancel after %d pages is not within 0..%d", o.CancelAfter, o.Pages)
	}
	if o.Now == nil {
		o.Now = time.Now
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
		"failures": o.Faults.Failures, "dropped failures": o.Faults.DroppedFailures,
		"bad signatures": o.Faults.BadSignatures, "oversized": o.Faults.Oversized} {
		if r < 0 || r > 1 {
			return nil, fmt.Errorf("crawlsim: %s rate %v is not within 0..1", name, r)
		}
	}
	if o.Faults.Drops+o.Faults.Failures+o.Faults.DroppedFailures+o.Faults.BadSignatures > 1 {
		return nil, errors.New("crawlsim: drops + failures + dropped failures + bad signatures exceed 1")
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
	// Drawn after the others so that a seed picks the same pages for them
	// as before dropped failures existed.
	n := min(count(o.Faults.DroppedFailures, o.Pages), o.Pages-at)
	for _, i := range perm[at : at+n] {
		faults[i] = append(faults[i], FaultFail, FaultDrop)
	}
	for _, f := range []struct {
		name string
		rate float64
	}{{FaultDuplicate, o.Faults.Duplicates}, {FaultOversized, o.Faults.Oversized}} {
		for _, i := range rng.Perm(o.Pages)[:count(f.rate, o.Pages)] {
			faults[i] = append(faults[i], f.name)
		}
	}

	c := &Crawl{ID: o.ID, Kind: o.Kind, Metadata: o.Metadata, CancelAt: -1, now: o.Now, status: crawlapi.StatusScraping,
		scrapedAt: make([]time.Time, o.Pages)}
	if o.Cancel {
		c.CancelAt = o.CancelAfter
	}
	if o.HTML {
		for i := range o.Pages {
			c.links = append(c.links, pageURL(o.Site, i))
		}
	}
	for i := range o.RobotsBlocked {
		c.RobotsBlocked = append(c.RobotsBlocked, fmt.Sprintf("%s/private/%d", o.Site, i))
	}
	for i := range o.Pages {
		p := &Page{Index: i, URL: pageURL(o.Site, i), WebhookID: newID(), Success: true, Faults: faults[i]}
		// The scrape job's id, derived so that the seed's sequence of ids
		// stays what it was before the errors endpoint existed.
		p.jobID = uuid.NewSHA1(uuid.NameSpaceOID, []byte(p.WebhookID)).String()
		if c.CancelAt >= 0 && i >= c.CancelAt {
			// Still queued when the job was cancelled: never scraped, so
			// neither a failure of its own nor a large page.
			p.Faults = slices.DeleteFunc(slices.Clone(p.Faults), func(f string) bool { return f == FaultFail || f == FaultOversized })
			p.Faults = append(p.Faults, FaultCancelled)
		}
		md := ""
		if p.Has(FaultFail) || p.Has(FaultCancelled) {
			p.Success = false
			p.Error, p.Code = FailedError, FailedCode
			if p.Has(FaultCancelled) {
				// Not an error with a code in the real API: the errors
				// endpoint gives only its message.
				p.Error, p.Code = CancelledError, ""
			}
		} else {
			p.ScrapeID = newID()
			size := o.PageBytes
			if p.Has(FaultOversized) {
				size = o.Faults.OversizeBytes
			}
			md = markdown(rng, i, size)
		}
		err := c.encode(p, md, 200)
		if err != nil {
			return nil, fmt.Errorf("crawlsim: encode page %d: %w", i, err)
		}
		c.Pages = append(c.Pages, p)
	}
	return c, nil
}

// pageURL is the URL of the i-th page of a job of site.
func pageURL(site string, i int) string { return fmt.Sprintf("%s/page/%d", site, i) }

func count(rate float64, n int) int {
	k := int(rate*float64(n) + 0.5)
	return min(k, n)
}

// Scrape makes the pages up to index n (exclusive) visible to the status
// endpoint. It never hides pages already scraped.
func (c *Crawl) Scrape(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scrapeLocked(n)
}

func (c *Crawl) scrapeLocked(n int) {
	n = min(n, len(c.Pages))
	if n <= c.scraped {
		return
	}
	now := c.now()
	for i := c.scraped; i < n; i++ {
		c.scrapedAt[i] = now
	}
	c.scraped = n
}

// Finish sets a terminal status. Completing a job scrapes all its pages;
// so does cancelling it, because its queued pages fail at once.
func (c *Crawl) Finish(status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if status == crawlapi.StatusCompleted || status == crawlapi.StatusCancelled {
		c.scrapeLocked(len(c.Pages))
	}
	c.status = status
}

// Cancel cancels the job as the cancel endpoint does: status cancelled, and
// every page not scraped yet fails. The pages from CancelAt on were built as
// those failures; Cancel does not change the pages.
func (c *Crawl) Cancel() { c.Finish(crawlapi.StatusCancelled) }

// FinalStatus is the status the job ends in: cancelled when Options.Cancel
// was set, else completed.
func (c *Crawl) FinalStatus() string {
	if c.CancelAt >= 0 {
		return crawlapi.StatusCancelled
	}
	return crawlapi.StatusCompleted
}

// EventType is the type of the job's event named event ("page",
// "started", "completed", "cancelled"): crawl.page, batch_scrape.page…
func (c *Crawl) EventType(event string) string { return c.Kind + "." + event }

// StatusPath is the path of the job's status endpoint.
func (c *Crawl) StatusPath() string { return crawlapi.JobRef(c.Kind, c.ID) }

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

// ErrorReads is the number of errors endpoint requests the job answered.
func (c *Crawl) ErrorReads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errorReads
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

// FailedURLs returns the URLs of the pages that failed (cancelled ones
// included): what the errors endpoint lists once the job has ended.
func (c *Crawl) FailedURLs() []string {
	var out []string
	for _, p := range c.Pages {
		if !p.Success {
			out = append(out, p.URL)
		}
	}
	return out
}

// eventBody returns a job-level delivery (crawl.started, crawl.completed,
// batch_scrape.cancelled…): data is [] as from the real sender.
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

// encode sets a page's delivery and status Document for its URL: a failed
// page's failure, or a scraped page of markdown md answering status.
func (c *Crawl) encode(p *Page, md string, status int) error {
	var err error
	pageType := c.Kind + ".page"
	if !p.Success {
		var d failedDocument
		d.Metadata.SourceURL = p.URL
		raw, _ := marshal(d)
		p.Body, err = encodeEvent(false, pageType, c.ID, p.WebhookID, []json.RawMessage{raw}, p.Error, c.Metadata)
		return err
	}
	title := fmt.Sprintf("Page %d", p.Index)
	doc := wireDocument{Markdown: md, Metadata: wireMetadata{
		Title: title, Language: "en", SourceURL: p.URL, URL: p.URL,
		StatusCode: status, ContentType: "text/html; charset=UTF-8", ScrapeID: p.ScrapeID,
		ProxyUsed: "basic", CacheState: "miss", CreditsUsed: 1,
	}}
	if c.links != nil {
		doc.HTML = pageHTML(title, md, c.links)
	}
	delivered, _ := marshal(doc)
	doc.Metadata.ContentType = ""
	p.doc, _ = marshal(doc)
	p.Body, err = encodeEvent(true, pageType, c.ID, p.WebhookID, []json.RawMessage{delivered}, "", c.Metadata)
	return err
}

// rngReader adapts a seeded generator to io.Reader for reproducible UUIDs.
type rngReader struct{ r *rand.Rand }

func (r rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}
