// Package crawlcorpus generates a corpus of crawl.page deliveries as real
// recrawls give them: several sites, each crawled several times, most pages
// delivered again unchanged or slightly edited, words with Zipf
// frequencies. The archive's benchmark (tools/archivebench) and the sink's
// (internal/sink) insert it, so that bytes and search are measured on text
// as repetitive across crawls as real text is. Every byte is a function of
// the seed and the page's coordinates.
package crawlcorpus

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The corpus: Sites sites of PagesPerSite pages each, every site crawled
// Crawls times, so that each URL is delivered once per crawl. Between two
// crawls a page changes with probability ChangeRate; an unchanged page is
// delivered again with the same markdown and html (new scrapeId, webhookId,
// received time), as a real recrawl of a site that barely moved. Every byte
// is a function of Seed and the page's coordinates: two runs with the same
// settings insert the same bodies, and nothing is held beyond one delivery.
type Corpus struct {
	Seed         uint64
	Sites        int
	PagesPerSite int
	Crawls       int
	ChangeRate   float64

	// MinMarkdown is the least markdown of a page: a page's markdown is
	// log-uniform between it and ten times it (New: 2 KB, so 2-20 KB).
	MinMarkdown int
	// HTML is whether pages carry html as well as markdown (New: true;
	// a crawl asks for it with formats ["markdown", "html"]).
	HTML bool
	// Edits is whether a page that changed is its previous version with a
	// few paragraphs rewritten, as most real edits are, rather than a page
	// written anew (New: false).
	Edits bool

	vocab  []string
	chrome []string // per site: the header, navigation and footer of its html
	base   time.Time
}

// VocabSize words with Zipf frequencies (s = ZipfS): the few most frequent
// ones are in every page, the tail's in a handful, as in real text.
const (
	VocabSize = 50000
	ZipfS     = 1.07
	// phraseEvery page versions in one carry PlantedPhrase, so that a phrase
	// search has a known, rare answer (two tail words are never adjacent by
	// chance).
	phraseEvery = 500
)

// Query words, by Zipf rank (0 is the most frequent).
const (
	RankCommon  = 3     // in every page
	RankMid     = 2000  // in a few percent of the pages
	RankPairA   = 800   // two tokens that meet in a few pages
	RankPairB   = 1500  //
	RankRare    = 45000 // in about one page in a thousand
	RankPhraseA = 20000 // the planted phrase: "A B"
	RankPhraseB = 20001
)

// New returns the corpus for n pages in total (rounded up to whole crawls
// of whole sites): pages of 2-20 KB of markdown with html, a changed page
// written anew.
func New(seed uint64, n, sites, crawls int, changeRate float64) *Corpus {
	sites = max(sites, 1)
	crawls = max(crawls, 1)
	per := max((n+sites*crawls-1)/(sites*crawls), 1)
	c := &Corpus{Seed: seed, Sites: sites, PagesPerSite: per, Crawls: crawls, ChangeRate: changeRate,
		MinMarkdown: 2048, HTML: true,
		base: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)}
	c.vocab = vocabulary(seed, VocabSize)
	for s := range sites {
		c.chrome = append(c.chrome, c.siteChrome(s))
	}
	return c
}

// Len is the number of page deliveries.
func (c *Corpus) Len() int { return c.Sites * c.PagesPerSite * c.Crawls }

// Word is the vocabulary word of Zipf rank r.
func (c *Corpus) Word(r int) string { return c.vocab[r] }

// PlantedPhrase is the phrase planted in one page version in phraseEvery.
func (c *Corpus) PlantedPhrase() string { return c.vocab[RankPhraseA] + " " + c.vocab[RankPhraseB] }

// Delivery i, in the order a sink would see them: crawl round by round, the
// Sites crawls of a round interleaved page by page.
type Delivery struct {
	Body       []byte
	ReceivedAt time.Time
	Site, Page int
	Round      int
}

// Coordinates of delivery i.
func (c *Corpus) coords(i int) (round, page, site int) {
	per := c.Sites * c.PagesPerSite
	round = i / per
	page = (i % per) / c.Sites
	site = i % c.Sites
	return
}

// RoundStart is when the crawls of round start: one round a day.
func (c *Corpus) RoundStart(round int) time.Time {
	return c.base.Add(time.Duration(round) * 24 * time.Hour)
}

// CrawlID is the id of site's crawl in round: a UUIDv7 of the round's start.
func (c *Corpus) CrawlID(site, round int) string {
	t := c.base.Add(time.Duration(round) * 24 * time.Hour)
	return uuid7(t, c.rng(1, uint64(site), uint64(round), 0))
}

// SitePrefix is the URL prefix of site's pages.
func (c *Corpus) SitePrefix(site int) string {
	return fmt.Sprintf("https://www.site%02d.example/", site)
}

// PageURL is the URL of a page of a site, the same in every round.
func (c *Corpus) PageURL(site, page int) string {
	r := c.rng(2, uint64(site), uint64(page), 0)
	z := c.zipf(r)
	section := c.vocab[10+r.IntN(40)]
	slug := c.vocab[z.Uint64()] + "-" + c.vocab[z.Uint64()]
	return fmt.Sprintf("%s%s/%s-%d", c.SitePrefix(site), section, slug, page)
}

// version is the content version of a page in round: the number of rounds
// up to it in which the page changed.
func (c *Corpus) version(site, page, round int) int {
	v := 0
	for k := 1; k <= round; k++ {
		if c.rng(3, uint64(site), uint64(page), uint64(k)).Float64() < c.ChangeRate {
			v++
		}
	}
	return v
}

// Delivery builds delivery i's crawl.page body.
func (c *Corpus) Delivery(i int) Delivery {
	round, page, site := c.coords(i)
	v := c.version(site, page, round)
	first := v
	if c.Edits {
		// An edited page keeps its first version's skeleton (title,
		// length, the paragraphs not rewritten: see page).
		first = 0
	}
	content := c.rng(4, uint64(site), uint64(page), uint64(first))
	meta := c.rng(5, uint64(site), uint64(page), uint64(round))
	at := c.base.Add(time.Duration(round)*24*time.Hour + time.Duration(page)*50*time.Millisecond + time.Duration(site)*time.Millisecond)

	url := c.PageURL(site, page)
	title, desc, md, html := c.page(content, site, page, v)
	status := 200
	if meta.IntN(100) == 0 {
		status = 404
	}
	cache := "miss"
	if round > 0 && meta.IntN(10) == 0 {
		cache = "hit"
	}
	proxy := "basic"
	if meta.IntN(20) == 0 {
		proxy = "stealth"
	}
	doc := document{
		Markdown: md,
		HTML:     html,
		Metadata: metadata{
			Title: title, Language: "en", OGTitle: title, Description: desc, OGTitleColon: title,
			ScrapeID: uuid7(at, meta), SourceURL: url, URL: url, StatusCode: status,
			ContentType: "text/html; charset=utf-8", ProxyUsed: proxy, CacheState: cache, CreditsUsed: 1,
		},
	}
	ev := event{
		Success: true, Type: "crawl.page", ID: c.CrawlID(site, round), WebhookID: uuid4(meta),
		Data: []document{doc}, Metadata: c.webhookMetadata(site, round),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The sender (Node's JSON.stringify) writes <, > and & as they are.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		panic(err) // only strings and numbers: cannot fail
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return Delivery{Body: body, ReceivedAt: at, Site: site, Page: page, Round: round}
}

// The body's shape and key order are those of the captured deliveries
// (testdata/fixtures/firecrawl-2026), with html requested too.
type event struct {
	Success   bool            `json:"success"`
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	WebhookID string          `json:"webhookId"`
	Data      []document      `json:"data"`
	Metadata  webhookMetadata `json:"metadata"`
}

// webhookMetadata names the crawl's scope (a site's crawls are the same
// crawl repeated) and a limit it never reaches, so that change tracking
// compares a site's rounds and their removals (docs/search.md).
type webhookMetadata struct {
	Site  string `json:"site"`
	Round int    `json:"round"`
	Scope string `json:"scope"`
	Limit int    `json:"limit"`
}

func (c *Corpus) webhookMetadata(site, round int) webhookMetadata {
	return webhookMetadata{Site: fmt.Sprintf("site%02d", site), Round: round, Scope: fmt.Sprintf("site%02d", site), Limit: 10 * c.PagesPerSite}
}

// Scope is the scope site's crawls name in their webhook metadata.
func (c *Corpus) Scope(site int) string { return c.webhookMetadata(site, 0).Scope }

// EndEvent is the crawl.completed delivery of a site's crawl round, after
// its last page.
func (c *Corpus) EndEvent(site, round int) Delivery {
	at := c.base.Add(time.Duration(round)*24*time.Hour + time.Duration(c.PagesPerSite)*50*time.Millisecond + time.Minute)
	body, err := json.Marshal(event{Success: true, Type: "crawl.completed", ID: c.CrawlID(site, round),
		WebhookID: uuid4(rand.New(rand.NewPCG(c.Seed, uint64(site*1000+round+1)))), Data: []document{}, Metadata: c.webhookMetadata(site, round)})
	if err != nil {
		panic(err) // only strings and numbers: cannot fail
	}
	return Delivery{Body: body, ReceivedAt: at, Site: site, Round: round}
}

type document struct {
	Markdown string   `json:"markdown"`
	HTML     string   `json:"html,omitempty"`
	Metadata metadata `json:"metadata"`
}

type metadata struct {
	Title        string `json:"title"`
	Language     string `json:"language"`
	OGTitle      string `json:"ogTitle"`
	Description  string `json:"description"`
	OGTitleColon string `json:"og:title"`
	ScrapeID     string `json:"scrapeId"`
	SourceURL    string `json:"sourceURL"`
	URL          string `json:"url"`
	StatusCode   int    `json:"statusCode"`
	ContentType  string `json:"contentType"`
	ProxyUsed    string `json:"proxyUsed"`
	CacheState   string `json:"cacheState"`
	CreditsUsed  int    `json:"creditsUsed"`
}

// editShare is the share of a changed page's blocks an edit rewrites,
// besides one of its first two, which it always does (Corpus.Edits).
const editShare = 0.1

// lastEdit is the version, up to version, whose edit last rewrote block b
// of a page (0: none did, the block is as first written).
func (c *Corpus) lastEdit(site, page, version, b int) int {
	for k := version; k >= 1; k-- {
		always := c.rng(8, uint64(site), uint64(page), uint64(k)<<32).IntN(2)
		if b == always || c.rng(8, uint64(site), uint64(page), uint64(k)<<32|uint64(b+1)).Float64() < editShare {
			return k
		}
	}
	return 0
}

// page writes one page version: markdown of MinMarkdown to ten times it
// (log-uniform), and html 2-4 times as long holding the same text in
// tags, padded with the site's chrome and per-page link cards (none
// without HTML). With Edits, r is the page's first version's and each
// block of text is drawn anew only in the versions that rewrote it.
func (c *Corpus) page(r *rand.Rand, site, page, version int) (title, desc, md, html string) {
	z := c.zipf(r)
	title = c.sentence(r, z, 3+r.IntN(6), false)
	desc = c.sentence(r, z, 10+r.IntN(16), true)
	target := int(float64(c.MinMarkdown) * math.Pow(10, r.Float64()))
	blockRand := func(b int) (*rand.Rand, *rand.Zipf) {
		if !c.Edits {
			return r, z
		}
		br := c.rng(9, uint64(site), uint64(page), uint64(b)<<32|uint64(c.lastEdit(site, page, version, b)))
		return br, c.zipf(br)
	}
	phrase := c.rng(6, uint64(site), uint64(page), uint64(version)).IntN(phraseEvery) == 0

	var m, h strings.Builder
	m.Grow(target + 512)
	h.Grow(4*target + 4096)
	fmt.Fprintf(&m, "# %s\n\n", title)
	h.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>`)
	h.WriteString(title)
	h.WriteString(`</title><meta name="description" content="`)
	h.WriteString(desc)
	h.WriteString(`"><meta name="viewport" content="width=device-width, initial-scale=1"></head><body>`)
	chrome := c.chrome[site]
	head, foot, _ := strings.Cut(chrome, "<!--main-->")
	h.WriteString(head)
	fmt.Fprintf(&h, `<main id="content"><article class="post"><h1 class="post-title">%s</h1>`, title)
	for block := 0; m.Len() < target; block++ {
		r, z := blockRand(block)
		switch {
		case block > 0 && block%4 == 0:
			hd := c.sentence(r, z, 2+r.IntN(4), false)
			fmt.Fprintf(&m, "## %s\n\n", hd)
			fmt.Fprintf(&h, `<h2 class="post-heading">%s</h2>`, hd)
		case block%7 == 5:
			h.WriteString(`<ul class="post-links">`)
			for range 3 + r.IntN(6) {
				a := c.sentence(r, z, 1+r.IntN(3), false)
				u := c.PageURL(site, r.IntN(max(c.PagesPerSite, 1)))
				fmt.Fprintf(&m, "- [%s](%s)\n", a, u)
				fmt.Fprintf(&h, `<li class="post-link"><a href="%s" rel="noopener">%s</a></li>`, u, a)
			}
			m.WriteString("\n")
			h.WriteString(`</ul>`)
		default:
			var p strings.Builder
			for s := range 3 + r.IntN(5) {
				if s > 0 {
					p.WriteByte(' ')
				}
				p.WriteString(c.sentence(r, z, 6+r.IntN(15), true))
			}
			if phrase && block == 1 {
				fmt.Fprintf(&p, " The %s is here.", c.PlantedPhrase())
			}
			m.WriteString(p.String())
			m.WriteString("\n\n")
			fmt.Fprintf(&h, `<p class="post-text">%s</p>`, p.String())
		}
	}
	h.WriteString(`</article>`)
	// Pad with link cards to the page's html/markdown ratio, then close.
	want := int(float64(m.Len())*(2+2*r.Float64())) - len(foot) - 16
	for h.Len() < want {
		u := c.PageURL(site, r.IntN(max(c.PagesPerSite, 1)))
		fmt.Fprintf(&h, `<div class="card card-related"><a class="card-link" href="%s"><img class="card-img" src="/img/%s.jpg" alt="%s" loading="lazy"><span class="card-title">%s</span></a></div>`,
			u, c.vocab[z.Uint64()], c.sentence(r, z, 3, false), c.sentence(r, z, 4, false))
	}
	h.WriteString(`</main>`)
	h.WriteString(foot)
	h.WriteString(`</body></html>`)
	if !c.HTML {
		return title, desc, strings.TrimRight(m.String(), "\n"), ""
	}
	return title, desc, strings.TrimRight(m.String(), "\n"), h.String()
}

// siteChrome is a site's fixed html around the content: header, a
// navigation of 40 links, inline style, footer. "<!--main-->" marks where
// the content goes.
func (c *Corpus) siteChrome(site int) string {
	r := c.rng(7, uint64(site), 0, 0)
	z := c.zipf(r)
	var b strings.Builder
	fmt.Fprintf(&b, `<style>.site-header{display:flex;gap:%dpx}.post-text{line-height:1.%d}.card{margin:%dpx}</style>`, 4+r.IntN(20), 3+r.IntN(6), r.IntN(16))
	fmt.Fprintf(&b, `<header class="site-header"><a class="logo" href="%s">%s</a><nav class="site-nav"><ul>`, c.SitePrefix(site), c.sentence(r, z, 2, false))
	for range 40 {
		fmt.Fprintf(&b, `<li class="nav-item"><a class="nav-link" href="%s%s/">%s</a></li>`, c.SitePrefix(site), c.vocab[10+r.IntN(40)], c.sentence(r, z, 1+r.IntN(2), false))
	}
	b.WriteString(`</ul></nav></header><!--main--><footer class="site-footer"><p>`)
	b.WriteString(c.sentence(r, z, 20, true))
	b.WriteString(`</p><script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}gtag('js',new Date());</script></footer>`)
	return b.String()
}

// sentence is n Zipf words, the first capitalized; with stop, a sentence
// with a comma or two and a full stop.
func (c *Corpus) sentence(r *rand.Rand, z *rand.Zipf, n int, stop bool) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			if stop && r.IntN(9) == 0 {
				b.WriteByte(',')
			}
			b.WriteByte(' ')
		}
		w := c.vocab[z.Uint64()]
		if i == 0 {
			b.WriteString(strings.ToUpper(w[:1]))
			b.WriteString(w[1:])
		} else {
			b.WriteString(w)
		}
	}
	if stop {
		b.WriteByte('.')
	}
	return b.String()
}

func (c *Corpus) zipf(r *rand.Rand) *rand.Zipf {
	return rand.NewZipf(r, ZipfS, 1, uint64(len(c.vocab)-1))
}

// rng is a generator for one purpose (kind) and coordinates, independent of
// every other: what a delivery holds does not depend on the ones before it.
func (c *Corpus) rng(kind, a, b, d uint64) *rand.Rand {
	h := fnv.New64a()
	var buf [40]byte
	for i, v := range []uint64{c.Seed, kind, a, b, d} {
		binary.LittleEndian.PutUint64(buf[8*i:], v)
	}
	h.Write(buf[:])
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// vocabulary returns n distinct lower-case words of letters only (the text
// index splits on anything else), built from syllables; shorter words get
// the more frequent ranks, as in real text.
func vocabulary(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, 0x766f636162))
	onsets := []string{"b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch", "cl", "dr", "gr", "pl", "sh", "st", "th", "tr"}
	nuclei := []string{"a", "e", "i", "o", "u", "ai", "ea", "ou", "io"}
	codas := []string{"", "", "", "n", "r", "s", "l", "t", "nd", "st", "rk"}
	seen := make(map[string]bool, n)
	words := make([]string, 0, n)
	for len(words) < n {
		var b strings.Builder
		for range 1 + r.IntN(4) {
			b.WriteString(onsets[r.IntN(len(onsets))])
			b.WriteString(nuclei[r.IntN(len(nuclei))])
		}
		b.WriteString(codas[r.IntN(len(codas))])
		w := b.String()
		if len(w) < 2 || seen[w] {
			continue
		}
		seen[w] = true
		words = append(words, w)
	}
	slices.SortStableFunc(words, func(a, b string) int { return len(a) - len(b) })
	return words
}

// uuid7 is a version 7 UUID for time t with random bits from r.
func uuid7(t time.Time, r *rand.Rand) string {
	var u [16]byte
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	binary.BigEndian.PutUint64(u[8:], r.Uint64())
	x := r.Uint32()
	u[6], u[7] = byte(x>>8), byte(x)
	u[6] = u[6]&0x0f | 0x70
	u[8] = u[8]&0x3f | 0x80
	return format(u)
}

// uuid4 is a random (version 4) UUID drawn from r.
func uuid4(r *rand.Rand) string {
	var u [16]byte
	binary.BigEndian.PutUint64(u[:8], r.Uint64())
	binary.BigEndian.PutUint64(u[8:], r.Uint64())
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return format(u)
}

func format(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}
