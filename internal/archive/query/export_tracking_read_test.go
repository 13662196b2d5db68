package query_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// TestExportNDJSONGitDiff: with the git-diff mode every changed line of
// the export carries the diff of the version it was compared with (read
// beside the export, in URL order, so the two streams must stay in step
// over URLs with and without a compared version), and no other line has
// one: 40 URLs of which every third was edited, every fifth is gone (404),
// and some are new.
func TestExportNDJSONGitDiff(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	r := apiReader(t, conn, cfg, time.Second)
	jobA, jobB := uuid.NewString(), uuid.NewString()
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	before, after := map[string]string{}, map[string]string{}
	for i := range 40 {
		u := fmt.Sprintf("https://g.example/%02d", i)
		md := fmt.Sprintf("# Page %d\n\nfirst line\nsecond line %d\nthird line", i, i)
		if i%7 != 6 { // a few URLs new in job B
			before[u] = md
			archivetest.InsertDelivery(t, w, readPageBody(jobA, u, "P", md, 200), at)
		}
		status := 200
		switch {
		case i%5 == 4:
			md, status = "", 404
		case i%3 == 0:
			md = strings.Replace(md, "second line", "second line, edited,", 1)
		}
		after[u] = md
		archivetest.InsertDelivery(t, w, readPageBody(jobB, u, "P", md, status), at.Add(time.Hour))
	}
	var out bytes.Buffer
	if _, err := r.ExportNDJSON(context.Background(), jobB, query.NDJSONOptions{ChangeTracking: true, GitDiff: true}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 40 {
		t.Fatalf("%d lines", len(lines))
	}
	diffs := 0
	for _, line := range lines {
		var doc struct {
			Metadata       struct{ URL string }
			ChangeTracking events.ChangeTracking `json:"changeTracking"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		u, ct := doc.Metadata.URL, doc.ChangeTracking
		if ct.ChangeStatus != events.ChangeChanged {
			if ct.Diff != nil {
				t.Errorf("%s, %s, has a diff", u, ct.ChangeStatus)
			}
			continue
		}
		want, err := events.NewTrackingDiff(before[u], after[u])
		if err != nil || want == nil {
			t.Fatal(err)
		}
		if diffs++; ct.Diff == nil || ct.Diff.Text != want.Text {
			t.Errorf("%s: diff %+v, want %q", u, ct.Diff, want.Text)
		}
	}
	// URLs 0..39: edited are multiples of 3 that are in job A and not gone.
	wantDiffs := 0
	for i := 0; i < 40; i += 3 {
		if i%7 != 6 && i%5 != 4 {
			wantDiffs++
		}
	}
	if diffs != wantDiffs {
		t.Errorf("%d changed lines, want %d", diffs, wantDiffs)
	}
}
