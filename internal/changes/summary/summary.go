// Package summary is a job's change summary as crawlhouse publishes it on
// crawl.changes, POSTs it to CHANGES_WEBHOOK_URL (internal/changes, in the
// sink) and answers it in GET /v1/jobs/{id} (internal/reader): how many of
// the job's URLs are new, changed, same and removed, and which changed or
// were removed, bounded in bytes with exact counts (Encode). It imports no
// NATS: the read API uses it too.
package summary

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/clip"
	"github.com/crawlhouse/crawlhouse/internal/events"
)

// Job is the summary of one job, what is published and POSTed for a job, encoded by Encode;
// GET /v1/jobs/{id} of the read API answers the same. Text makes it a valid
// Slack incoming-webhook message; the other fields are for machines.
type Job struct {
	Text    string `json:"text"`
	CrawlID string `json:"crawlId"`
	// Kind is events.KindCrawl or events.KindBatchScrape; Scope the scope
	// the job's webhook metadata names ("" when none), cut to
	// clip.MaxField bytes.
	Kind  string `json:"kind"`
	Scope string `json:"scope,omitempty"`
	// Complete: the job ended complete, so URLs it no longer found are
	// counted as removed (docs/search.md, "What changed").
	Complete bool   `json:"complete"`
	New      uint64 `json:"new"`
	Changed  uint64 `json:"changed"`
	Same     uint64 `json:"same"`
	Removed  uint64 `json:"removed"`
	// ChangedURLs and RemovedURLs are the first changed and removed URLs,
	// in URL order: at most CHANGES_MAX_URLS of each, and fewer when the
	// summary would not fit in its byte bound (see encode). Changed and
	// Removed are the totals, whatever the lists hold.
	ChangedURLs []string `json:"changedUrls"`
	RemovedURLs []string `json:"removedUrls"`
	// ChangedURLsOmitted and RemovedURLsOmitted count the URLs of each
	// class the lists leave out (Changed - len(ChangedURLs), ...).
	// Truncated says that something was left out or cut: a URL of a list,
	// or the end of Scope.
	ChangedURLsOmitted uint64 `json:"changedUrlsOmitted"`
	RemovedURLsOmitted uint64 `json:"removedUrlsOmitted"`
	Truncated          bool   `json:"truncated"`
	// URLPatterns are CHANGES_URL_PATTERNS when set: the counts are of the
	// matching URLs only.
	URLPatterns  []string  `json:"urlPatterns,omitempty"`
	SummarizedAt time.Time `json:"summarizedAt"`
}

func summaryText(s Job) string {
	text := fmt.Sprintf("%s %s: %d %s, %d %s, %d %s, %d %s", events.KindNoun(s.Kind), s.CrawlID,
		s.New, events.ChangeNew, s.Changed, events.ChangeChanged, s.Removed, events.ChangeRemoved, s.Same, events.ChangeSame)
	if s.Scope != "" {
		text += " (scope " + s.Scope + ")"
	}
	return text
}

// Of is the summary of what a job changed (query.Reader.JobChanges
// read with patterns), made at at.
func Of(jc query.JobChanges, patterns []string, at time.Time) Job {
	return Job{CrawlID: jc.CrawlID, Kind: jc.Kind, Scope: jc.Scope, Complete: jc.Complete,
		New: jc.New, Changed: jc.Changed, Same: jc.Same, Removed: jc.Removed,
		ChangedURLs: jc.ChangedURLs, RemovedURLs: jc.RemovedURLs,
		URLPatterns: patterns, SummarizedAt: at.UTC()}
}

// Encode returns s as JSON of at most limit bytes (the NATS server's
// max_payload: a larger message is refused, never delivered). The counts
// are always exact; what gives way is the URL lists. When the whole lists
// do not fit, the changed and removed URLs are taken in turn, each list
// keeping its URL order, until the next URL of a list does not fit: both
// classes are shown, and each list stays a prefix of the class's URLs. The
// Omitted counts and Truncated say what was left out. URLs are hostile
// bytes: their cost is what JSON makes of them (escapes included), never
// their length.
func Encode(s Job, limit int) ([]byte, error) {
	scope := clip.Cut(s.Scope, clip.MaxField)
	s.Truncated = scope != s.Scope
	s.Scope = scope
	s.Text = summaryText(s)
	changed, removed := nonNil(s.ChangedURLs), nonNil(s.RemovedURLs)
	fits := func(changed, removed []string) ([]byte, error) {
		t := s
		t.ChangedURLs, t.RemovedURLs = changed, removed
		t.ChangedURLsOmitted = s.Changed - min(s.Changed, uint64(len(changed)))
		t.RemovedURLsOmitted = s.Removed - min(s.Removed, uint64(len(removed)))
		t.Truncated = s.Truncated || t.ChangedURLsOmitted+t.RemovedURLsOmitted > 0
		return json.Marshal(t)
	}
	// Without URLs every Omitted count is at its widest: each URL added
	// costs its JSON and a comma, and shortens a count, so adding URLs
	// while their cost fits the room left cannot overflow. Only the URLs
	// kept, and one more of each list, are encoded: CHANGES_MAX_URLS of
	// long URLs are a hundred megabytes of JSON.
	empty, err := fits([]string{}, []string{})
	if err != nil {
		return nil, err
	}
	room := limit - len(empty)
	if room < 0 {
		return nil, fmt.Errorf("change summary of job %s: %d bytes without URLs, over the bound of %d", s.CrawlID, len(empty), limit)
	}
	lists := [2][]string{changed, removed}
	var kept [2]int
	for open := [2]bool{true, true}; open[0] || open[1]; {
		for i := range lists {
			if !open[i] {
				continue
			}
			if kept[i] == len(lists[i]) {
				open[i] = false
				continue
			}
			u, err := json.Marshal(lists[i][kept[i]])
			if err != nil {
				return nil, err
			}
			if len(u)+1 > room {
				open[i] = false
				continue
			}
			room -= len(u) + 1
			kept[i]++
		}
	}
	return fits(changed[:kept[0]], removed[:kept[1]])
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
