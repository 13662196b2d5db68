package web

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/textdiff"
	"github.com/google/uuid"
)

// pageNames are the templates besides the layout, one per page.
var pageNames = []string{"jobs", "job", "failures", "search", "page", "diff", "error", "login"}

// parseTemplates parses the layout with each page's template.
func (s *Server) parseTemplates() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"link":     s.link,
		"linkable": linkable,
		"when":     when,
		"short":    short,
		"state":    state,
		"took":     took,
		"op":       func(o textdiff.Op) string { return string(rune(o)) },
		"kinds":    func() []string { return []string{events.KindCrawl, events.KindBatchScrape} },
		"kindNoun": events.KindNoun,
		"counts":   func(job uuid.UUID, c query.ChangeCounts) jobCounts { return jobCounts{job, c} },
	}
	out := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// jobCounts is a job's URLs by change class, as the "change-cells"
// template shows them: each count a link to the search of its class in
// the job (the job page and the jobs list alike).
type jobCounts struct {
	Job uuid.UUID
	query.ChangeCounts
}

// link is the URL of one of the pages, path under Base, with query
// parameters given as name, value pairs (a value a string or a job id);
// empty values are left out.
func (s *Server) link(path string, pairs ...any) string {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if v := asText(pairs[i+1]); v != "" {
			q.Set(asText(pairs[i]), v)
		}
	}
	if len(q) == 0 {
		return s.base + path
	}
	return s.base + path + "?" + q.Encode()
}

// With is the current page's URL with parameter name set to value (the
// next page of a list keeps its filters).
func (v view) With(name, value string) string {
	q := url.Values{}
	for k, vs := range v.query {
		q[k] = vs
	}
	q.Set(name, value)
	return v.Base + v.Path + "?" + q.Encode()
}

// Param is a parameter of the current request as it was given, to show a
// form as it was filled in.
func (v view) Param(name string) string { return v.query.Get(name) }

// when formats a time (time.Time or *time.Time) in UTC to the second; ""
// for none.
func when(t any) string {
	switch t := t.(type) {
	case time.Time:
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	case *time.Time:
		if t == nil {
			return ""
		}
		return when(*t)
	}
	return ""
}

// short is the first 8 characters of a job id, as shown in lists.
func short(id any) string {
	s := asText(id)
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// asText is a template's value as text: a string, or a job id (a UUID, or a
// pointer to one: "" for none).
func asText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case fmt.Stringer:
		if p, ok := v.(*uuid.UUID); ok && p == nil {
			return ""
		}
		return v.String()
	}
	return fmt.Sprint(v)
}

// state is a job's plain state from its newest lifecycle event: completed,
// cancelled or failed once an event ended it, running before.
func state(lastEvent string) string {
	if !events.EndsJob(lastEvent) {
		return "running"
	}
	_, end, _ := strings.Cut(lastEvent, ".")
	return end
}

// took is the time from a job's first delivery to its last, to the second
// ("" before any delivery): its duration once it ended, so far before.
func took(c archive.Crawl) string {
	if c.FirstDeliveryAt == nil || c.LastDeliveryAt == nil {
		return ""
	}
	return c.LastDeliveryAt.Sub(*c.FirstDeliveryAt).Round(time.Second).String()
}
