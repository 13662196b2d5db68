package main

import (
	"os"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlcorpus"
)

// Insert rates are printed at 10k, 20k, 50k, 100k... pages: how cost grows
// with size.
func TestCheckpoints(t *testing.T) {
	var got []int
	for c := 10000; c <= 1000000; c = nextCheckpoint(c) {
		got = append(got, c)
	}
	want := []int{10000, 20000, 50000, 100000, 200000, 500000, 1000000}
	if len(got) != len(want) {
		t.Fatalf("checkpoints %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("checkpoints %v, want %v", got, want)
		}
	}
}

// The granules column must say what the query reads, of what, and what the
// text index kept, from ClickHouse 26.7's EXPLAIN indexes = 1.
func TestSummarizeExplain(t *testing.T) {
	lines := []string{
		"│        └──ReadFromMergeTree (archbench.pages)",
		"│              Parts: 1 | Granules: 418",
		"│              Indexes:",
		"│                PrimaryKey",
		"│                  Parts: 1/1",
		"│                  Granules: 643/643",
		"│                Skip",
		"│                  Name: markdown_text",
		"│                  Granules: 187/643",
		"│                PrimaryKeyExpand",
		"│                  Granules: 418/187",
	}
	if got, want := summarizeExplain(lines), "418/643 (index 187)"; got != want {
		t.Errorf("with the index: %q, want %q", got, want)
	}
	if got, want := summarizeExplain(lines[:6]), "418/643"; got != want {
		t.Errorf("without: %q, want %q", got, want)
	}
}

// Every sql block of docs/search.md is timed, on the benchmark's database,
// with the corpus's values in place of the examples.
func TestDocumentedQueries(t *testing.T) {
	doc, err := os.ReadFile("../../docs/search.md")
	if err != nil {
		t.Fatal(err)
	}
	c := crawlcorpus.New(1, 1000, 10, 5, 0.2)
	qs := documentedQueries(string(doc), "archbench", docExamples(c))
	if want := strings.Count(string(doc), "```sql\n"); len(qs) != want || want < 10 {
		t.Fatalf("%d queries from %d sql blocks", len(qs), want)
	}
	all := strings.Join(qs, "\n")
	for _, example := range []string{"crawl.", "'5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c'", "'example.com'", "'https://example.com/'", "'illustrative examples'", "'domain'"} {
		if strings.Contains(all, example) {
			t.Errorf("the example %s is still in the queries", example)
		}
	}
	for _, want := range []string{"archbench.pages FINAL", "'" + c.CrawlID(5, 3) + "'", "'www.site05.example'", "hasPhrase(markdown, '" + c.PlantedPhrase() + "')"} {
		if !strings.Contains(all, want) {
			t.Errorf("no %s in the queries:\n%s", want, all)
		}
	}
}
