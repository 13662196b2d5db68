package events_test

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetools"
	"github.com/crawlhouse/crawlhouse/internal/testkit/trackingtest"
)

// TestTrackingDiffCrawlAPI: for the fixtures and for edits of every shape
// (insertions, deletions, reorders, empty to text and back, no final
// newline, unicode, CRLF, and seeded random edits of texts with repeated
// lines, where a diff has several shortest forms), diff.text is what the
// crawl API's own code writes with the npm packages it pins (jsdiff's
// createTwoFilesPatch) and diff.json is parse-diff's parse of it, field by
// field (testdata/crawlapi-diff.mjs, run under node).
func TestTrackingDiffCrawlAPI(t *testing.T) {
	t.Parallel()
	cases := trackingDiffCases(t)
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "pairs.json")
	if err := os.WriteFile(file, in, 0o600); err != nil {
		t.Fatal(err)
	}
	var want []*json.RawMessage
	if err := json.Unmarshal(archivetools.Run(t, filepath.Join("testdata", "crawlapi-diff.mjs"), file), &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(cases) {
		t.Fatalf("node wrote %d diffs for %d pairs", len(want), len(cases))
	}
	for i, c := range cases {
		d, err := events.NewTrackingDiff(c.Previous, c.Current)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if want[i] == nil {
			if d != nil {
				t.Errorf("%s: diff %q, the crawl API's none", c.Name, d.Text)
			}
			continue
		}
		var w struct {
			Text string `json:"text"`
			JSON any    `json:"json"`
		}
		if err := json.Unmarshal(*want[i], &w); err != nil {
			t.Fatal(err)
		}
		if d == nil {
			t.Errorf("%s: no diff, the crawl API's %q", c.Name, w.Text)
			continue
		}
		if d.Text != w.Text {
			t.Errorf("%s (%q → %q): text\n%q\nthe crawl API's\n%q", c.Name, c.Previous, c.Current, d.Text, w.Text)
			continue
		}
		b, _ := json.Marshal(d.JSON)
		var got any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, w.JSON) {
			wb, _ := json.Marshal(w.JSON)
			t.Errorf("%s: json\n%s\nthe crawl API's\n%s", c.Name, b, wb)
		}
	}
}

type diffPair struct {
	Name     string `json:"name"`
	Previous string `json:"previous"`
	Current  string `json:"current"`
}

// trackingDiffCases are the fixtures' pair, named edges and 400 seeded
// random edits.
func trackingDiffCases(t *testing.T) []diffPair {
	const page = "# Title\n\nIntro line.\n\n- one\n- two\n- three\n\nA paragraph.\nAnother.\nEnd.\n"
	cases := []diffPair{
		{"fixture", string(trackingtest.Fixture(t, "previous.md")), string(trackingtest.Fixture(t, "current.md"))},
		{"insertion", page, strings.Replace(page, "- two\n", "- two\n- two and a half\n", 1)},
		{"insertion at the start", page, "New first.\n" + page},
		{"deletion", page, strings.Replace(page, "A paragraph.\n", "", 1)},
		{"reorder", page, strings.Replace(strings.Replace(page, "- one\n", "- ONE\n", 1), "- one\n- two\n", "- two\n- one\n", 1)},
		{"swap of two lines", "a\nb\nc\n", "b\na\nc\n"},
		{"lines moved far", page, "Another.\nEnd.\n" + strings.TrimSuffix(page, "Another.\nEnd.\n")},
		{"empty to text", "", page},
		{"text to empty", page, ""},
		{"empty to one line without newline", "", "x"},
		{"no trailing newline, both", "a\nb\nc", "a\nB\nc"},
		{"trailing newline added", "a\nb", "a\nb\nc\n"},
		{"trailing newline removed", "a\nb\n", "a\nc"},
		{"final newline alone", "a\nb", "a\nb\n"},
		{"unicode", "café\n日本語\nemoji 🙂\n", "café\n日本\nemoji 🙃\nñ\n"},
		{"CRLF edit", "a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n"},
		{"CRLF to LF", "a\r\nb\r\n", "a\nb\n"},
		{"lone CR", "a\rb\nc\n", "a\rB\nc\n"},
		{"markdown-like lines", "--- x\n+++ y\n@@ -1 +1 @@\n\\ No newline at end of file\n", "--- x\n+++ z\n@@ -1 +1 @@\n"},
		{"blank lines", "\n\n\na\n\n\n", "\n\na\n\n\n\n"},
		{"two hunks", strings.Repeat("x\n", 3) + "a\n" + strings.Repeat("y\n", 10) + "b\n", strings.Repeat("x\n", 3) + "A\n" + strings.Repeat("y\n", 10) + "B\n"},
		{"hunks seven apart merge not", "a\n1\n2\n3\n4\n5\n6\n7\nb\n", "A\n1\n2\n3\n4\n5\n6\n7\nB\n"},
		{"hunks six apart merge", "a\n1\n2\n3\n4\n5\n6\nb\n", "A\n1\n2\n3\n4\n5\n6\nB\n"},
		{"equal", page, page},
	}
	rng := rand.New(rand.NewSource(41))
	for i := 0; i < 400; i++ {
		prev := randomText(rng)
		cases = append(cases, diffPair{fmt.Sprintf("random %d", i), prev, randomEdit(rng, prev)})
	}
	return cases
}

// randomText is up to 12 lines drawn from a few, so that lines repeat
// and a diff has several shortest forms; sometimes without a final
// newline or with CRLF.
func randomText(rng *rand.Rand) string {
	words := []string{"a", "b", "c", "", "- item", "# h", "a\r"}
	var sb strings.Builder
	for n := rng.Intn(13); n > 0; n-- {
		sb.WriteString(words[rng.Intn(len(words))] + "\n")
	}
	s := sb.String()
	if rng.Intn(4) == 0 {
		s = strings.TrimSuffix(s, "\n")
	}
	return s
}

// randomEdit inserts, deletes, replaces and moves a few lines of s.
func randomEdit(rng *rand.Rand, s string) string {
	lines := strings.SplitAfter(s, "\n")
	for n := 1 + rng.Intn(4); n > 0; n-- {
		i := rng.Intn(len(lines) + 1)
		switch rng.Intn(4) {
		case 0:
			lines = append(lines[:i], append([]string{[]string{"a\n", "b\n", "new\n", "\n"}[rng.Intn(4)]}, lines[i:]...)...)
		case 1:
			if i < len(lines) {
				lines = append(lines[:i], lines[i+1:]...)
			}
		case 2:
			if i < len(lines) {
				lines[i] = "changed\n"
			}
		case 3:
			if j := rng.Intn(len(lines) + 1); i < len(lines) && j < len(lines) {
				lines[i], lines[j] = lines[j], lines[i]
			}
		}
	}
	out := strings.Join(lines, "")
	if rng.Intn(5) == 0 {
		out = strings.TrimSuffix(out, "\n")
	}
	return out
}
