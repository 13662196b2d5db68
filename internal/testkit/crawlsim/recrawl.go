package crawlsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Recrawl makes a job a later crawl of the site an earlier job crawled,
// with edits, for testing change tracking. The earlier job's pages are
// those NewCrawl builds from the same Options with ID Of and no Recrawl:
// run the earlier job with -crawl-id and the recrawl with -recrawl-of that
// id and the same -seed, -site, -pages and -page-bytes.
//
// The recrawl's pages, in scrape order: the first Edited of the earlier
// pages with a sentence added, the next Reordered with their paragraphs in
// reverse order, the next NotFound answering 404, then the rest unchanged
// but for the last Gone, which the recrawl does not find at all; then
// Added pages at URLs the earlier job never had (<site>/added/<n>). The
// recrawl has ids (webhook, scrape) of its own; a page that a fault fails
// is failed in the recrawl whatever its edit.
type Recrawl struct {
	Of                                       string
	Edited, Reordered, NotFound, Gone, Added int
}

// EditedSentence is what an edited page gains at its end.
const EditedSentence = "\n\nThis page was edited."

func newRecrawl(o Options) (*Crawl, error) {
	r := *o.Recrawl
	for name, n := range map[string]int{"edited": r.Edited, "reordered": r.Reordered, "not found": r.NotFound, "gone": r.Gone, "added": r.Added} {
		if n < 0 {
			return nil, fmt.Errorf("crawlsim: recrawl %s pages must not be negative", name)
		}
	}
	if r.Edited+r.Reordered+r.NotFound+r.Gone > o.Pages {
		return nil, fmt.Errorf("crawlsim: recrawl edits %d pages of %d", r.Edited+r.Reordered+r.NotFound+r.Gone, o.Pages)
	}
	if r.Of == "" {
		return nil, errors.New("crawlsim: recrawl of which job: its id is empty")
	}
	if o.Seed == 0 {
		return nil, errors.New("crawlsim: a recrawl needs the earlier job's seed to rebuild its pages")
	}
	earlierOpts := o
	earlierOpts.Recrawl, earlierOpts.ID = nil, r.Of
	earlier, err := NewCrawl(earlierOpts)
	if err != nil {
		return nil, fmt.Errorf("crawlsim: the recrawled job: %w", err)
	}
	laterOpts := o
	laterOpts.Recrawl = nil
	laterOpts.Pages = o.Pages - r.Gone + r.Added
	if laterOpts.Seed != 0 {
		// Ids of its own; the kept text comes from the earlier job.
		laterOpts.Seed ^= 0x2545f4914f6cdd1d
	}
	c, err := NewCrawl(laterOpts)
	if err != nil {
		return nil, err
	}
	kept := o.Pages - r.Gone
	site := strings.TrimSuffix(earlier.Pages[0].URL, "/page/0")
	for i, p := range c.Pages {
		p.URL = fmt.Sprintf("%s/added/%d", site, i-kept)
		if i < kept {
			p.URL = earlier.Pages[i].URL
		}
	}
	if o.HTML {
		// The pages link what the recrawl finds: not the gone ones, the
		// added ones.
		c.links = c.links[:0]
		for _, p := range c.Pages {
			c.links = append(c.links, p.URL)
		}
	}
	for i, p := range c.Pages {
		md, status := pageMarkdown(p), 200
		if i < kept {
			md = pageMarkdown(earlier.Pages[i])
			switch {
			case i < r.Edited:
				md += EditedSentence
			case i < r.Edited+r.Reordered:
				paragraphs := strings.Split(md, "\n\n")
				slices.Reverse(paragraphs)
				md = strings.Join(paragraphs, "\n\n")
			case i < r.Edited+r.Reordered+r.NotFound:
				md, status = "# Not Found", 404
			}
		}
		if err := c.encode(p, md, status); err != nil {
			return nil, fmt.Errorf("crawlsim: encode page %d: %w", i, err)
		}
	}
	return c, nil
}

// pageMarkdown is the markdown of a scraped page's Document ("" for a
// failed page).
func pageMarkdown(p *Page) string {
	var d wireDocument
	_ = json.Unmarshal(p.doc, &d)
	return d.Markdown
}
