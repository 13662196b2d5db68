package query_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetools"
	"github.com/google/uuid"
	"github.com/nlnwa/gowarc/v3"
)

// TestExportWARC: a recrawled job as a .warc.gz, read back member by
// member and by a WARC reader that validates strictly. By default every
// page of the job is a full response record (the unchanged one too) with
// its real status line (a 500 replays as a 500), its markdown a conversion
// record, each record one gzip member citing the warcinfo record and dated
// when the page was received; a page without any HTTP answer is left out
// and counted. With revisits the unchanged page is a revisit record into
// the previous job.
func TestExportWARC(t *testing.T) {
	t.Parallel()
	r, _, jobB, t0 := recrawledJob(t)
	ctx := context.Background()
	at := func(i int) string { return t0.Add(time.Hour + time.Duration(i)*time.Second).Format(time.RFC3339) }

	t.Run("self-contained", func(t *testing.T) {
		got := exportWARC(t, r, jobB, query.WARCOptions{})
		want := []string{
			"warcinfo  unanswered=1",
			"response https://w.example/broken " + at(4) + " 500 ",
			"response https://w.example/evil%0D%0AWARC-Type:%20response " + at(2) + " 200 <p>Evil</p>",
			"conversion https://w.example/evil%0D%0AWARC-Type:%20response " + at(2) + " evil",
			"response https://w.example/gone " + at(3) + " 404 <p>Gone</p>",
			"conversion https://w.example/gone " + at(3) + " not here",
			"response https://w.example/moved " + at(0) + " 200 <p>Moved</p>",
			"conversion https://w.example/moved " + at(0) + " new text",
			"response https://w.example/same " + at(1) + " 200 <p>Same</p>",
			"conversion https://w.example/same " + at(1) + " unchanged text",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("records\n%q\nwant\n%q", got, want)
		}
	})
	t.Run("revisits", func(t *testing.T) {
		got := exportWARC(t, r, jobB, query.WARCOptions{Revisits: true})
		if want := "revisit https://w.example/same " + at(1) + " refers to " + t0.Format("2006-01-02T15:04:05.000Z"); got[len(got)-1] != want {
			t.Fatalf("last record %q, want %q (all: %q)", got[len(got)-1], want, got)
		}
		if want := "conversion https://w.example/moved " + at(0) + " new text"; got[len(got)-2] != want {
			t.Fatalf("changed page: %q, want %q", got[len(got)-2], want)
		}
	})
	if _, err := r.ExportWARC(ctx, uuid.NewString(), query.WARCOptions{}, io.Discard); !errors.Is(err, archive.ErrNoCrawl) {
		t.Fatalf("unknown job: %v", err)
	}
}

// recrawledJob stores two jobs of w.example, the second a recrawl with an
// unchanged page, a changed one, a hostile URL, a 404, a failed scrape (a
// 500) and a page without any HTTP answer; jobB's pages are received at t0
// plus an hour plus 0 to 5 seconds, in that order (moved, same, evil, gone,
// broken, nodns).
func recrawledJob(t *testing.T) (r *query.Reader, w *archive.Store, jobB string, t0 time.Time) {
	t.Helper()
	conn, cfg := archivetest.StartClickHouse(t)
	w = archivetest.NewStore(t, conn, cfg)
	r, err := query.NewReader(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	jobA := uuid.NewString()
	jobB = uuid.NewString()
	t0 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	archivetest.InsertDelivery(t, w, readPageBody(jobA, "https://w.example/same", "Same", "unchanged text", 200), t0)
	archivetest.InsertDelivery(t, w, readPageBody(jobA, "https://w.example/moved", "Moved", "old text", 200), t0)
	for i, body := range []string{
		readPageBody(jobB, "https://w.example/moved", "Moved", "new text", 200),
		strings.Replace(readPageBody(jobB, "https://w.example/same", "Same", "unchanged text", 200), `"webhookId"`, `"x":1,"webhookId"`, 1),
		// A hostile URL: a line break would split a WARC header.
		readPageBody(jobB, "https://w.example/evil\r\nWARC-Type: response", "Evil", "evil", 200),
		readPageBody(jobB, "https://w.example/gone", "Gone", "not here", 404),
		readFailureBody(jobB, "https://w.example/broken", "boom"),
		// No HTTP answer at all: nothing to replay.
		`{"success":false,"type":"crawl.page","id":"` + jobB + `","webhookId":"` + uuid.NewString() + `","error":"dns","data":[{"markdown":"","metadata":{"url":"https://w.example/nodns","sourceURL":"https://w.example/nodns"}}]}`,
	} {
		archivetest.InsertDelivery(t, w, body, t0.Add(time.Hour+time.Duration(i)*time.Second))
	}
	return r, w, jobB, t0
}

// exportWARC exports job and describes its records, one line each, after
// checking that each is one gzip member, that each cites the warcinfo
// record, and that a strict WARC reader reads them all.
func exportWARC(t *testing.T, r *query.Reader, job string, opts query.WARCOptions) []string {
	t.Helper()
	var buf bytes.Buffer
	n, err := r.ExportWARC(context.Background(), job, opts, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Errorf("counted %d bytes, wrote %d", n, buf.Len())
	}
	members := gzipMembers(t, buf.Bytes())
	rd, err := gowarc.NewWarcFileReaderFromStream(bytes.NewReader(buf.Bytes()), 0, gowarc.WithStrictValidation())
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []string
	var infoID string
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("invalid WARC after %q: %v", got, err)
		}
		got = append(got, describeRecord(t, rec.WarcRecord, &infoID))
		rec.WarcRecord.Close()
	}
	if members != len(got) {
		t.Fatalf("%d gzip members for %d records", members, len(got))
	}
	if other := warcioRecords(t, buf.Bytes()); fmt.Sprint(other) != fmt.Sprint(withoutDates(got)) {
		t.Fatalf("warcio read\n%q\ngowarc read\n%q", other, withoutDates(got))
	}
	return got
}

// warcioRecords reads a .warc.gz with webrecorder's warcio and describes
// its records as describeRecord does, less the dates, after checking that
// every record cites the first (the warcinfo) and that each response's
// payload matches its digest.
func warcioRecords(t *testing.T, warc []byte) []string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "job.warc.gz")
	if err := os.WriteFile(file, warc, 0o600); err != nil {
		t.Fatal(err)
	}
	out := archivetools.Run(t, filepath.Join("testdata", "warcio-read.mjs"), file)
	var got []string
	var infoID string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var rec struct {
			Type, ID, Target, Warcinfo, Payload string
			Status                              int
			DigestOK                            *bool
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("warcio: %v: %s", err, line)
		}
		switch {
		case rec.Type == "warcinfo":
			infoID = rec.ID
			_, count, _ := strings.Cut(rec.Payload, "crawlhouse-unanswered: ")
			count, _, _ = strings.Cut(count, "\r\n")
			got = append(got, "warcinfo  unanswered="+count)
			continue
		case rec.Warcinfo != infoID:
			t.Fatalf("warcio: %s record cites %q, want %q", rec.Type, rec.Warcinfo, infoID)
		case rec.Type == "response" && (rec.DigestOK == nil || !*rec.DigestOK):
			t.Fatalf("warcio: response %s: payload digest does not match", rec.Target)
		}
		desc := rec.Type + " " + rec.Target
		switch rec.Type {
		case "response":
			desc += fmt.Sprintf(" %d %s", rec.Status, rec.Payload)
		case "conversion":
			desc += " " + rec.Payload
		}
		got = append(got, desc)
	}
	return got
}

// withoutDates drops the date (the third field) of describeRecord's lines,
// and what a revisit refers to.
func withoutDates(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		f := strings.SplitN(l, " ", 4)
		switch {
		case len(f) < 3 || f[0] == "warcinfo":
			out[i] = l
		case f[0] == "revisit":
			out[i] = f[0] + " " + f[1]
		case len(f) == 4:
			out[i] = f[0] + " " + f[1] + " " + f[3]
		default:
			out[i] = f[0] + " " + f[1]
		}
	}
	return out
}

// describeRecord is one line: type, target, date, then the status and
// body of a response, the body of a conversion, the date a revisit refers
// to, or the unanswered count of the warcinfo record.
func describeRecord(t *testing.T, wr gowarc.WarcRecord, infoID *string) string {
	t.Helper()
	h := wr.WarcHeader()
	if wr.Type() == gowarc.Warcinfo {
		*infoID = h.Get(gowarc.WarcRecordID)
		body := blockText(t, wr)
		_, count, _ := strings.Cut(body, "crawlhouse-unanswered: ")
		count, _, _ = strings.Cut(count, "\r\n")
		return "warcinfo  unanswered=" + count
	}
	if h.Get(gowarc.WarcWarcinfoID) != *infoID || *infoID == "" {
		t.Fatalf("%s record cites warcinfo %q, want %q", wr.Type(), h.Get(gowarc.WarcWarcinfoID), *infoID)
	}
	date, err := time.Parse(time.RFC3339, h.Get(gowarc.WarcDate))
	if err != nil {
		t.Fatal(err)
	}
	line := wr.Type().String() + " " + h.Get(gowarc.WarcTargetURI) + " " + date.Format(time.RFC3339)
	switch wr.Type() {
	case gowarc.Response:
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(blockText(t, wr))), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		return line + fmt.Sprintf(" %d %s", resp.StatusCode, body)
	case gowarc.Conversion:
		return line + " " + blockText(t, wr)
	case gowarc.Revisit:
		return line + " refers to " + h.Get(gowarc.WarcRefersToDate)
	}
	return line
}

func blockText(t *testing.T, wr gowarc.WarcRecord) string {
	t.Helper()
	b, err := wr.Block().RawBytes()
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// gzipMembers counts the gzip members of a .warc.gz.
func gzipMembers(t *testing.T, b []byte) int {
	t.Helper()
	br := bytes.NewReader(b)
	zr, err := gzip.NewReader(br)
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	n := 0
	for {
		zr.Multistream(false)
		if _, err := io.Copy(io.Discard, zr); err != nil {
			t.Fatalf("gzip member %d: %v", n, err)
		}
		n++
		if err := zr.Reset(br); errors.Is(err, io.EOF) {
			return n
		} else if err != nil {
			t.Fatalf("gzip member %d: %v", n, err)
		}
	}
}

// gunzip is the text of a .warc.gz, its members joined.
func gunzip(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
