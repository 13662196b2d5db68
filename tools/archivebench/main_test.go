package main

import "testing"

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
