package query_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
)

// TestExports: a job's pages as NDJSON (the Documents byte for byte) and
// as Parquet (written by ClickHouse, read back by it). The WARC export has
// its own test (TestExportWARC).
func TestExports(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	r, httpURL := parquetReader(t, conn, cfg)
	ctx := context.Background()
	jobA, jobB := uuid.NewString(), uuid.NewString()
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	same := readPageBody(jobA, "https://w.example/same", "Same", "unchanged text", 200)
	archivetest.InsertDelivery(t, w, same, t0)
	archivetest.InsertDelivery(t, w, readPageBody(jobA, "https://w.example/moved", "Moved", "old text", 200), t0)
	var docs []string
	for i, body := range []string{
		readPageBody(jobB, "https://w.example/moved", "Moved", "new text", 200),
		strings.Replace(readPageBody(jobB, "https://w.example/same", "Same", "unchanged text", 200), `"webhookId"`, `"x":1,"webhookId"`, 1),
		// A hostile URL: a line break would split a WARC header.
		readPageBody(jobB, "https://w.example/evil\r\nWARC-Type: response", "Evil", "evil", 200),
	} {
		archivetest.InsertDelivery(t, w, body, t0.Add(time.Hour+time.Duration(i)*time.Second))
		ev := archivetest.MustDecode(t, body)
		docs = append(docs, string(ev.Data[0].Raw))
	}

	t.Run("ndjson", func(t *testing.T) {
		var buf bytes.Buffer
		n, err := r.ExportNDJSON(ctx, jobB, query.NDJSONOptions{}, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(buf.Len()) {
			t.Errorf("counted %d bytes, wrote %d", n, buf.Len())
		}
		// By URL: evil, moved, same.
		want := docs[2] + "\n" + docs[0] + "\n" + docs[1] + "\n"
		if buf.String() != want {
			t.Fatalf("ndjson:\n%s\nwant:\n%s", buf.String(), want)
		}
		if _, err := r.ExportNDJSON(ctx, uuid.NewString(), query.NDJSONOptions{}, io.Discard); !errors.Is(err, archive.ErrNoCrawl) {
			t.Fatalf("unknown job: %v", err)
		}
	})
	t.Run("parquet", func(t *testing.T) {
		var buf bytes.Buffer
		if _, err := r.ExportParquet(ctx, jobB, &buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(buf.Bytes(), []byte("PAR1")) || !bytes.HasSuffix(buf.Bytes(), []byte("PAR1")) {
			t.Fatalf("not a Parquet file: %q…", buf.Bytes()[:min(16, buf.Len())])
		}
		// ClickHouse reads it back.
		clickhouseHTTP(t, httpURL, "CREATE TABLE "+cfg.Database+".parquet_back (url String, markdown String, status_code Int32) ENGINE = Memory", nil)
		clickhouseHTTP(t, httpURL, "INSERT INTO "+cfg.Database+".parquet_back FORMAT Parquet", buf.Bytes())
		got := clickhouseHTTP(t, httpURL, "SELECT count(), arrayStringConcat(groupArray(url), ' '), sum(status_code) FROM "+cfg.Database+".parquet_back FORMAT TSV", nil)
		if !strings.HasPrefix(got, "3\t") || !strings.Contains(got, "https://w.example/moved") {
			t.Fatalf("read back: %q", got)
		}
		noHTTP, _ := r.WithReadOptions(query.ReadOptions{})
		if _, err := noHTTP.ExportParquet(ctx, jobB, io.Discard); !errors.Is(err, query.ErrNoHTTP) {
			t.Fatalf("without the HTTP interface: %v", err)
		}
	})
}

// parquetReader is a Reader of conn's archive that writes Parquet through
// ClickHouse's HTTP interface, and that interface's URL.
func parquetReader(t *testing.T, conn driver.Conn, cfg archive.Config) (*query.Reader, string) {
	t.Helper()
	httpURL := clickhousetest.HTTPURL(t)
	r, err := query.NewReader(conn, cfg)
	if err == nil {
		r, err = r.WithReadOptions(query.ReadOptions{HTTPURL: httpURL})
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, httpURL
}

// clickhouseHTTP runs query over ClickHouse's HTTP interface with body as
// its input.
func clickhouseHTTP(t *testing.T, base, query string, body []byte) string {
	t.Helper()
	if body == nil {
		body, query = []byte(query), ""
	}
	resp, err := http.Post(base+"/?query="+url.QueryEscape(query), "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d: %s", resp.StatusCode, b)
	}
	return string(b)
}
