package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// A Content-Security-Policy violation on the pages means crawled content
// tried to run a script or reach another host, and the browser refused.
// The policy asks browsers to report each one (report-uri, which browsers
// send at once, for the pages and for the archived html in its sandbox,
// which inherits the policy); the pages log them, so an operator sees
// which archived page is hostile. Reports come from browsers, not from
// crawled sites, but are read as hostile all the same: the body is bounded
// and every field is clamped.

// cspReportPath is where, under Base, browsers post violation reports.
const cspReportPath = "/csp-report"

// ReportBurst and ReportRate bound the reports logged, as a token bucket:
// lines let through at once, and lines a second after that. Reports need
// no token (a browser sends them without one), so a flood of them must not
// fill the log disk; each line says how many were suppressed before it.
const (
	ReportBurst = 20
	ReportRate  = 1.0
)

// maxCSPReport bounds a report's body; a real one is a few hundred bytes.
const maxCSPReport = 16 << 10

// cspReport is the body browsers post to a report-uri.
type cspReport struct {
	Report struct {
		DocumentURI        string `json:"document-uri"`
		EffectiveDirective string `json:"effective-directive"`
		ViolatedDirective  string `json:"violated-directive"`
		BlockedURI         string `json:"blocked-uri"`
	} `json:"csp-report"`
}

// cspViolation logs one report and answers 204; a body that is not a
// report gets 400 and is not logged.
func (s *Server) cspViolation(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCSPReport+1))
	if err != nil || len(body) > maxCSPReport {
		http.Error(w, "report unreadable or too large", http.StatusBadRequest)
		return
	}
	var rep cspReport
	if err := json.Unmarshal(body, &rep); err != nil {
		http.Error(w, "not a CSP report", http.StatusBadRequest)
		return
	}
	directive := rep.Report.EffectiveDirective
	if directive == "" {
		directive = rep.Report.ViolatedDirective
	}
	ok, suppressed := s.reports.Allow()
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.log.Warn().
		Int64("suppressed", suppressed).
		Str("page", clampField(withoutQuery(rep.Report.DocumentURI))).
		Str("directive", clampField(directive)).
		Str("blocked", clampField(rep.Report.BlockedURI)).
		Msg("the browser blocked crawled content (Content-Security-Policy)")
	w.WriteHeader(http.StatusNoContent)
}

// withoutQuery drops a URL's query: the pages' own query strings name the
// crawled URL, which is in the path of a log line already, and could carry
// whatever a reader typed.
func withoutQuery(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	p.RawQuery, p.Fragment, p.User = "", "", nil
	return p.String()
}

// clampField bounds a logged field to 512 bytes of valid UTF-8.
func clampField(s string) string {
	const maxField = 512
	if len(s) > maxField {
		s = s[:maxField]
	}
	return strings.ToValidUTF8(s, "")
}
