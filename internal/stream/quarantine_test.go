package stream_test

import (
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/stream"
)

// The quarantine's streams and subjects are named from one prefix, which
// the receiver (writing them) and the sink (purging them) read alike; a
// prefix that could not name a stream is refused by its variable.
func TestQuarantineStreams(t *testing.T) {
	t.Parallel()
	q := stream.QuarantineStreams{QuarantineStream: " CRAWL_REJECTED "}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, class := range stream.QuarantineClasses() {
		sc := q.StreamOf(class, 1<<20, time.Hour, 3)
		if sc.Name != q.NameOf(class) || len(sc.Subjects) != 1 || sc.Subjects[0] != q.SubjectOf(class) || sc.MaxBytes != 1<<20 || sc.MaxAge != time.Hour || sc.Replicas != 3 {
			t.Errorf("%s: %+v", class, sc)
		}
		names = append(names, sc.Name+" "+sc.Subjects[0])
	}
	if want := []string{"CRAWL_REJECTED_INVALID CRAWL_REJECTED.invalid", "CRAWL_REJECTED_UNVERIFIED CRAWL_REJECTED.unverified"}; len(names) != 2 || names[0] != want[0] || names[1] != want[1] {
		t.Errorf("streams %q, want %q", names, want)
	}
	for _, bad := range []string{"", "  ", "A.B", "A*", "A>", "A B"} {
		if err := (stream.QuarantineStreams{QuarantineStream: bad}).Validate(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
