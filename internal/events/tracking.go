package events

import (
	"fmt"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/textdiff"
)

// Visibilities of ChangeTracking, as the crawl API names them.
const (
	// VisibilityVisible: the crawl found the URL through its links.
	VisibilityVisible = "visible"
	// VisibilityHidden: the crawl did not (a removal by absence).
	VisibilityHidden = "hidden"
)

// Modes of change tracking, as the crawl API's changeTracking format names
// them.
const (
	// ModeGitDiff adds the diff (text and its parsed form).
	ModeGitDiff = "git-diff"
	// ModeJSON is the crawl API's extraction of structured data, which
	// needs a schema and a model the archive has not.
	ModeJSON = "json"
)

// MaxTrackingDiff bounds a diff's text: past it the diff is left out and
// ChangeTracking.DiffOmitted says so. Its parsed form is about three times
// as large.
const MaxTrackingDiff = 1 << 20

// TrackingDiff is the git-diff mode's diff: the unified diff as the crawl
// API writes it and the same parsed (the parse-diff package's shape).
type TrackingDiff struct {
	Text string     `json:"text"`
	JSON DiffParsed `json:"json"`
}

// DiffParsed is a parsed diff: one file, the markdown.
type DiffParsed struct {
	Files []DiffFile `json:"files"`
}

// DiffFile is the diff of one file.
type DiffFile struct {
	From   *string     `json:"from"`
	To     *string     `json:"to"`
	Chunks []DiffChunk `json:"chunks"`
}

// DiffChunk is one hunk: its "@@" line and its lines.
type DiffChunk struct {
	Content string       `json:"content"`
	Changes []DiffChange `json:"changes"`
}

// DiffChange is one line of a hunk. Content is the line with its "+", "-"
// or " "; a context line has Normal, Ln1 (old) and Ln2 (new line number),
// an added one Add and Ln (new), a removed one Del and Ln (old). Fields are
// in the order the crawl API writes them.
type DiffChange struct {
	Type    string `json:"type"`
	Content string `json:"content"`
	Normal  bool   `json:"normal,omitempty"`
	Add     bool   `json:"add,omitempty"`
	Del     bool   `json:"del,omitempty"`
	Ln      int    `json:"ln,omitempty"`
	Ln1     int    `json:"ln1,omitempty"`
	Ln2     int    `json:"ln2,omitempty"`
}

// The file names and marker the crawl API's diff writes.
const (
	diffFrom  = "previous.md"
	diffTo    = "current.md"
	noNewline = `\ No newline at end of file`
)

// TrackingTime writes a time as the crawl API writes previousScrapeAt.
func TrackingTime(t time.Time) *string {
	s := t.UTC().Format("2006-01-02T15:04:05.000Z")
	return &s
}

// NewTrackingDiff diffs two markdowns as the crawl API's git-diff mode
// does: jsdiff's unified diff of previous.md into current.md with 3 lines
// of context (textdiff.Exact finds jsdiff's edits), byte for byte its
// header, hunk and marker lines, and parse-diff's parse of it, as the
// crawl API keeps it. The test against those npm packages is
// TestTrackingDiffCrawlAPI. It returns nil when no line differs (a change
// of a line's ending or of the final newline is a difference, as there),
// and an error past MaxTrackingDiff. textdiff bounds the work; past its
// bounds the diff is correct but coarse, where jsdiff's would be minimal.
func NewTrackingDiff(previous, current string) (*TrackingDiff, error) {
	r := textdiff.Exact(previous, current)
	if !r.Changed() {
		return nil, nil
	}
	from, to := diffFrom, diffTo
	file := DiffFile{From: &from, To: &to}
	var sb strings.Builder
	sb.WriteString(strings.Repeat("=", 67) + "\n--- " + diffFrom + "\t\n+++ " + diffTo + "\t\n")
	for _, h := range r.Hunks() {
		chunk := DiffChunk{Content: fmt.Sprintf("@@ -%d,%d +%d,%d @@", start(h.OldBefore, h.OldLines), h.OldLines, start(h.NewBefore, h.NewLines), h.NewLines)}
		sb.WriteString(chunk.Content + "\n")
		a, b := h.OldBefore+1, h.NewBefore+1
		for _, e := range h.Edits {
			c := DiffChange{Content: string(e.Op) + e.Line}
			switch e.Op {
			case textdiff.Equal:
				c.Type, c.Normal, c.Ln1, c.Ln2 = "normal", true, a, b
				a, b = a+1, b+1
			case textdiff.Delete:
				c.Type, c.Del, c.Ln = "del", true, a
				a++
			case textdiff.Insert:
				c.Type, c.Add, c.Ln = "add", true, b
				b++
			}
			sb.WriteString(c.Content + "\n")
			chunk.Changes = append(chunk.Changes, c)
			// A last line without "\n" is followed by the marker, which
			// parse-diff reads as a change of the line's type and numbers.
			if e.NoNewline {
				sb.WriteString(noNewline + "\n")
				c.Content = noNewline
				chunk.Changes = append(chunk.Changes, c)
			}
		}
		if sb.Len() > MaxTrackingDiff {
			return nil, fmt.Errorf("diff: larger than %d bytes", MaxTrackingDiff)
		}
		file.Chunks = append(file.Chunks, chunk)
	}
	return &TrackingDiff{Text: sb.String(), JSON: DiffParsed{Files: []DiffFile{file}}}, nil
}

// start is a hunk's first line as the crawl API writes it: 1-based, or the
// line before an empty range.
func start(before, n int) int {
	if n == 0 {
		return before
	}
	return before + 1
}
