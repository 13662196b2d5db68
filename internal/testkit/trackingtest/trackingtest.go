// Package trackingtest checks a changeTracking object against the fixtures
// written from the crawl API's own type (testdata/changetracking): every
// surface that shows the object (the query package, the read API, `sink
// diff --json`) is held to the same shape by the same check.
package trackingtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Fixture reads testdata/changetracking/name from the repository root.
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
	b, err := os.ReadFile(filepath.Join(dir, "testdata", "changetracking", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// CheckShape fails t unless got has the fixture's shape field by field:
// the same keys at every level (arrays compared by their first element),
// each value of the same JSON type (null where the fixture has null).
// Values are not compared: each surface's test checks its own.
func CheckShape(t testing.TB, got []byte, fixture string) {
	t.Helper()
	var want, have any
	if err := json.Unmarshal(Fixture(t, fixture), &want); err != nil {
		t.Fatalf("fixture %s: %v", fixture, err)
	}
	if err := json.Unmarshal(got, &have); err != nil {
		t.Fatalf("changeTracking %s: %v", got, err)
	}
	if diffs := shape("changeTracking", want, have, nil); len(diffs) > 0 {
		t.Errorf("changeTracking against %s:\n%s\ngot %s", fixture, strings.Join(diffs, "\n"), got)
	}
}

func shape(at string, want, have any, out []string) []string {
	if kind(want) != kind(have) {
		return append(out, fmt.Sprintf("%s: %s, want %s", at, kind(have), kind(want)))
	}
	switch w := want.(type) {
	case map[string]any:
		h := have.(map[string]any)
		for _, k := range keys(w, h) {
			if _, ok := h[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: missing", at, k))
				continue
			}
			if _, ok := w[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: not in the fixture", at, k))
				continue
			}
			out = shape(at+"."+k, w[k], h[k], out)
		}
	case []any:
		h := have.([]any)
		if len(w) > 0 && len(h) > 0 {
			out = shape(at+"[0]", w[0], h[0], out)
		} else if len(w) != len(h) {
			out = append(out, fmt.Sprintf("%s: %d elements, want %d", at, len(h), len(w)))
		}
	}
	return out
}

func keys(a, b map[string]any) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}
