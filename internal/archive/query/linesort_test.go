package query

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestLineSorter: lines far past the sorter's memory bound come out sorted
// by bytes, every one once, merged from several runs on disk; the runs'
// file is gone after close. Lines that share prefixes or differ only in
// length, and duplicates, keep their order by bytes.
func TestLineSorter(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var want []string
	s := newLineSorter(t.TempDir(), 256)
	for i := range 2000 {
		line := fmt.Sprintf("com,example)/%s %d {}\n", strings.Repeat("a", rng.IntN(5)), rng.IntN(50))
		if i%7 == 0 {
			line = "urn:markdown:" + line
		}
		want = append(want, line)
		if err := s.add([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	var out bytes.Buffer
	n, err := s.writeTo(&out)
	if err != nil || n != int64(out.Len()) {
		t.Fatalf("writeTo: %d, %v (wrote %d)", n, err, out.Len())
	}
	if len(s.runs) < 10 {
		t.Fatalf("%d runs: the lines were not spilled", len(s.runs))
	}
	if got := out.String(); got != strings.Join(want, "") {
		t.Fatalf("merged lines differ from sorted input (%d bytes, want %d)", len(got), len(strings.Join(want, "")))
	}
	name := s.file.Name()
	s.close()
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("runs file left behind: %v", err)
	}
}
