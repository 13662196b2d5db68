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
