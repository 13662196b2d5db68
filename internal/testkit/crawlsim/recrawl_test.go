package crawlsim

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRecrawl: a recrawl keeps the earlier job's URLs and text but for its
// edits, in the documented order, with ids of its own.
func TestRecrawl(t *testing.T) {
	t.Parallel()
	const earlierID = "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c"
	o := Options{ID: earlierID, Pages: 8, PageBytes: 600, Seed: 7}
	earlier, err := NewCrawl(o)
	if err != nil {
		t.Fatal(err)
	}
	o.ID = ""
	o.Recrawl = &Recrawl{Of: earlierID, Edited: 1, Reordered: 1, NotFound: 1, Gone: 2, Added: 3}
	later, err := NewCrawl(o)
	if err != nil {
		t.Fatal(err)
	}
	if later.ID == earlierID || len(later.Pages) != 8-2+3 {
		t.Fatalf("recrawl %s of %d pages, want a new id and 9 pages", later.ID, len(later.Pages))
	}
	delivered := func(p *Page) (string, int) {
		var ev struct {
			Data []wireDocument `json:"data"`
		}
		if err := json.Unmarshal(p.Body, &ev); err != nil {
			t.Fatal(err)
		}
		d := ev.Data[0]
		if d.Metadata.URL != p.URL {
			t.Errorf("page %d delivered as %s, want %s", p.Index, d.Metadata.URL, p.URL)
		}
		return d.Markdown, d.Metadata.StatusCode
	}
	for i, p := range later.Pages {
		md, status := delivered(p)
		if p.WebhookID == earlier.Pages[min(i, 7)].WebhookID {
			t.Errorf("page %d: the earlier job's webhook id", i)
		}
		if i >= 6 {
			if !strings.HasPrefix(p.URL, "https://example.com/added/") || md == "" || status != 200 {
				t.Errorf("page %d: %s answering %d, want an added page", i, p.URL, status)
			}
			continue
		}
		was, _ := delivered(earlier.Pages[i])
		if p.URL != earlier.Pages[i].URL {
			t.Errorf("page %d: %s, want the earlier job's %s", i, p.URL, earlier.Pages[i].URL)
		}
		switch i {
		case 0:
			if md != was+EditedSentence {
				t.Errorf("edited page: %q", md)
			}
		case 1:
			if md == was || len(md) != len(was) || !strings.HasSuffix(md, strings.SplitN(was, "\n\n", 2)[0]) {
				t.Errorf("reordered page: %q, was %q", md, was)
			}
		case 2:
			if status != 404 {
				t.Errorf("not-found page answers %d", status)
			}
		default:
			if md != was || status != 200 {
				t.Errorf("page %d changed: %q answering %d, was %q", i, md, status, was)
			}
		}
	}
	if err := func() error {
		_, err := NewCrawl(Options{Pages: 2, Seed: 1, Recrawl: &Recrawl{Of: earlierID, Gone: 3}})
		return err
	}(); err == nil {
		t.Error("a recrawl removing more pages than the job had was built")
	}
}
