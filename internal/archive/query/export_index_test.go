package query_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetools"
	"github.com/google/uuid"
)

// cdxjLine is one line of a CDXJ index.
type cdxjLine struct {
	Key, Timestamp string
	URL            string `json:"url"`
	Mime           string `json:"mime"`
	Status         string `json:"status"`
	Digest         string `json:"digest"`
	Length         string `json:"length"`
	Offset         string `json:"offset"`
	Filename       string `json:"filename"`
}

// parseCDXJ reads an index after checking that its lines are sorted by
// bytes, as CDXJ requires (by key, then timestamp).
func parseCDXJ(t *testing.T, text string) []cdxjLine {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if !slices.IsSorted(lines) {
		t.Fatalf("index not sorted:\n%s", text)
	}
	out := make([]cdxjLine, 0, len(lines))
	for _, l := range lines {
		f := strings.SplitN(l, " ", 3)
		if len(f) != 3 {
			t.Fatalf("not a CDXJ line: %q", l)
		}
		c := cdxjLine{Key: f[0], Timestamp: f[1]}
		if err := json.Unmarshal([]byte(f[2]), &c); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, c)
	}
	return out
}

// warcioIndex indexes warc, saved as name, with warcio's own indexer.
func warcioIndex(t *testing.T, warc []byte, name string) []cdxjLine {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, warc, 0o600); err != nil {
		t.Fatal(err)
	}
	out := string(archivetools.Run(t, filepath.Join("testdata", "warcio-cdx-index.mjs"), file))
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	slices.Sort(lines)
	return parseCDXJ(t, strings.Join(lines, "\n"))
}

// agreeWithWarcio checks our index of warc against warcio's, record by
// record (matched by offset): the same length, digest, timestamp, status,
// MIME type and file name, and for a page's records the same key and URL;
// a markdown conversion record is keyed and named apart (urn:markdown:).
func agreeWithWarcio(t *testing.T, ours []cdxjLine, warc []byte, name string) {
	t.Helper()
	theirs := warcioIndex(t, warc, name)
	byOffset := map[string]cdxjLine{}
	for _, c := range theirs {
		byOffset[c.Offset] = c
	}
	if len(ours) != len(theirs) {
		t.Fatalf("%d lines, warcio indexed %d records:\n%v\n%v", len(ours), len(theirs), ours, theirs)
	}
	for _, c := range ours {
		w, ok := byOffset[c.Offset]
		if !ok {
			t.Fatalf("line %+v: warcio has no record at offset %s", c, c.Offset)
		}
		key, url := w.Key, w.URL
		if w.Mime == "text/markdown; charset=utf-8" {
			key, url, w.Mime = "urn:markdown:"+w.URL, "urn:markdown:"+w.URL, "text/markdown"
		}
		w.Key, w.URL = key, url
		if c != w {
			t.Errorf("line\n%+v\nwarcio\n%+v", c, w)
		}
	}
}

// TestExportCDXJ: the index of a recrawled job's WARC export, in both its
// forms (self-contained, and with revisits), agrees record by record with
// the index warcio's own indexer makes of the file, is sorted, and a
// lookup of a page's key finds its html response alone. The export is the
// same bytes each time (its offsets hold for any download of the job).
func TestExportCDXJ(t *testing.T) {
	t.Parallel()
	r, w, job, t0 := recrawledJob(t)
	// Its key sorts first, its URL last: the index is sorted apart.
	archivetest.InsertDelivery(t, w, readPageBody(job, "https://www.W.example/a?b=2&a=1#top", "A", "a text", 200), t0.Add(2*time.Hour))
	ctx := context.Background()
	for _, opts := range []query.WARCOptions{{}, {Revisits: true}} {
		t.Run(fmt.Sprintf("revisits=%v", opts.Revisits), func(t *testing.T) {
			var warc, again, index bytes.Buffer
			if _, err := r.ExportWARC(ctx, job, opts, &warc); err != nil {
				t.Fatal(err)
			}
			if _, err := r.ExportWARC(ctx, job, opts, &again); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(warc.Bytes(), again.Bytes()) {
				t.Fatal("two exports of the same job differ")
			}
			n, err := r.ExportCDXJ(ctx, job, opts, &index)
			if err != nil || n != int64(index.Len()) {
				t.Fatalf("export: %d bytes, %v (wrote %d)", n, err, index.Len())
			}
			name := query.WARCFileName(uuid.MustParse(job))
			ours := parseCDXJ(t, index.String())
			agreeWithWarcio(t, ours, warc.Bytes(), name)
			if ours[0].Key != "example,w)/a?a=1&b=2" || ours[0].Timestamp != t0.Add(2*time.Hour).Format("20060102150405") {
				t.Fatalf("first line %+v", ours[0])
			}
			var found []string
			for _, c := range ours {
				if c.Filename != name {
					t.Fatalf("line %+v: file name, want %s", c, name)
				}
				if c.Key == "example,w)/same" {
					found = append(found, c.Mime)
				}
			}
			want := "[text/html]"
			if opts.Revisits {
				want = "[warc/revisit]"
			}
			if fmt.Sprint(found) != want {
				t.Fatalf("lookup of https://w.example/same: %v, want %s", found, want)
			}
		})
	}
}

// TestExportWACZ: a recrawled job as a WACZ, opened by another zip reader
// than Go's: the WARC stored, each file's hash and size as
// datapackage.json states them, the index that of the WARC as warcio
// indexes it, one page line per replayable page.
func TestExportWACZ(t *testing.T) {
	t.Parallel()
	r, _, job, t0 := recrawledJob(t)
	var buf bytes.Buffer
	n, err := r.ExportWACZ(context.Background(), job, &buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("export: %d bytes, %v (wrote %d)", n, err, buf.Len())
	}
	file := filepath.Join(t.TempDir(), "job.wacz")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Files []struct {
			Name   string
			Method int
		}
		Datapackage struct {
			Profile     string `json:"profile"`
			WACZVersion string `json:"wacz_version"`
			Created     string `json:"created"`
			Resources   []struct {
				Path string `json:"path"`
			} `json:"resources"`
		}
		Problems     []string
		Index, Pages string
	}
	if err := json.Unmarshal(archivetools.Run(t, filepath.Join("testdata", "wacz-check.mjs"), file), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Problems) > 0 {
		t.Fatalf("datapackage.json does not match the files: %q", got.Problems)
	}
	var files, resources []string
	for _, f := range got.Files {
		files = append(files, fmt.Sprintf("%s %d", f.Name, f.Method))
	}
	for _, res := range got.Datapackage.Resources {
		resources = append(resources, res.Path)
	}
	if want := "[archive/data.warc.gz 0 indexes/index.cdxj 8 pages/pages.jsonl 8 datapackage.json 8]"; fmt.Sprint(files) != want {
		t.Fatalf("files (name, method) %v, want %s", files, want)
	}
	if want := "[archive/data.warc.gz indexes/index.cdxj pages/pages.jsonl]"; fmt.Sprint(resources) != want {
		t.Fatalf("resources %v, want %s", resources, want)
	}
	if p := got.Datapackage; p.Profile != "data-package" || p.WACZVersion != "1.1.1" || p.Created != t0.Add(time.Hour+5*time.Second).Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("datapackage %+v", p)
	}
	agreeWithWarcio(t, parseCDXJ(t, got.Index), waczFile(t, buf.Bytes(), "archive/data.warc.gz"), "data.warc.gz")
	var pages []string
	for _, l := range strings.Split(strings.TrimSuffix(got.Pages, "\n"), "\n")[1:] {
		var p struct{ URL, TS, Title string }
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatal(err)
		}
		pages = append(pages, p.URL+" "+p.TS+" "+p.Title)
	}
	at := func(i int) string {
		return t0.Add(time.Hour + time.Duration(i)*time.Second).Format("2006-01-02T15:04:05.000Z")
	}
	want := []string{"https://w.example/broken " + at(4) + " ", "https://w.example/evil%0D%0AWARC-Type:%20response " + at(2) + " Evil",
		"https://w.example/gone " + at(3) + " Gone", "https://w.example/moved " + at(0) + " Moved", "https://w.example/same " + at(1) + " Same"}
	if header, _, _ := strings.Cut(got.Pages, "\n"); header != `{"format":"json-pages-1.0","id":"pages","title":"All Pages"}` || fmt.Sprint(pages) != fmt.Sprint(want) {
		t.Fatalf("pages.jsonl\n%s\nwant lines %q", got.Pages, want)
	}
}

// waczFile is the file name of a zip, as Go reads it (the test has checked
// its hash with another reader).
func waczFile(t *testing.T, b []byte, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := zr.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
