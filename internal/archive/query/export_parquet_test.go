package query_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetools"
	"github.com/google/uuid"
)

// TestExportParquetSchema: a Parquet reader other than ClickHouse
// (hyparquet) reads the export's schema: what can be missing is OPTIONAL,
// status_code a signed 32-bit integer, the index columns are there; and
// ClickHouse reads back NULL where a failed page has no html, its error
// where it has one, and the index columns' values.
func TestExportParquetSchema(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	r, httpURL := parquetReader(t, conn, cfg)
	jobA, jobB := uuid.NewString(), uuid.NewString()
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	archivetest.InsertDelivery(t, w, readPageBody(jobA, "https://www.Shop.example.co.uk/Kept?q=1", "Kept", "kept", 200), t0)
	archivetest.InsertDelivery(t, w, readPageBody(jobB, "https://www.Shop.example.co.uk/Kept?q=1", "Kept", "kept", 200), t0.Add(time.Hour))
	archivetest.InsertDelivery(t, w, readFailureBody(jobB, "https://shop.example.co.uk/broken", "boom"), t0.Add(time.Hour))
	// Its SURT key drops www2, keeps the port, sorts the query, drops the fragment.
	archivetest.InsertDelivery(t, w, readPageBody(jobB, "https://www2.Shop.example.co.uk:8443/A?b=2&a=1#frag", "A", "a", 200), t0.Add(time.Hour))
	// No HTTP answer: no record in the WARC to point at.
	archivetest.InsertDelivery(t, w, `{"success":false,"type":"crawl.page","id":"`+jobB+`","webhookId":"`+uuid.NewString()+
		`","error":"dns","data":[{"markdown":"","metadata":{"url":"https://shop.example.co.uk/nodns","sourceURL":"https://shop.example.co.uk/nodns"}}]}`, t0.Add(time.Hour))
	var buf bytes.Buffer
	if _, err := r.ExportParquet(context.Background(), jobB, &buf); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "job.parquet")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var footer struct {
		Columns []struct {
			Name, Type, Repetition, Logical string
		}
		RowGroups []int
	}
	if err := json.Unmarshal(archivetools.Run(t, filepath.Join("testdata", "parquet-schema.mjs"), file), &footer); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range footer.Columns {
		got = append(got, fmt.Sprintf("%s %s %s %s", c.Name, c.Type, c.Repetition, c.Logical))
	}
	want := []string{
		"crawl_id BYTE_ARRAY REQUIRED STRING", "job_kind BYTE_ARRAY REQUIRED STRING", "url BYTE_ARRAY REQUIRED STRING",
		"surt_key BYTE_ARRAY REQUIRED STRING", "host BYTE_ARRAY REQUIRED STRING", "registered_domain BYTE_ARRAY OPTIONAL STRING",
		"title BYTE_ARRAY OPTIONAL STRING", "status_code INT32 REQUIRED ", "success BOOLEAN REQUIRED ",
		"origin BYTE_ARRAY REQUIRED STRING", "received_at INT64 REQUIRED TIMESTAMP", "error BYTE_ARRAY OPTIONAL STRING",
		"content_digest BYTE_ARRAY OPTIONAL STRING", "mime_type BYTE_ARRAY OPTIONAL STRING", "language BYTE_ARRAY OPTIONAL STRING",
		"change BYTE_ARRAY OPTIONAL STRING", "warc_filename BYTE_ARRAY OPTIONAL STRING", "warc_offset INT64 OPTIONAL ",
		"warc_length INT64 OPTIONAL ", "markdown BYTE_ARRAY OPTIONAL STRING", "html BYTE_ARRAY OPTIONAL STRING",
		"document BYTE_ARRAY REQUIRED STRING",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("schema\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if fmt.Sprint(footer.RowGroups) != "[4]" {
		t.Fatalf("row groups %v", footer.RowGroups)
	}
	clickhouseHTTP(t, httpURL, "CREATE TABLE "+cfg.Database+".parquet_schema (url String, warc_filename Nullable(String), warc_offset Nullable(Int64), warc_length Nullable(Int64), surt_key String, registered_domain Nullable(String), error Nullable(String), html Nullable(String), content_digest Nullable(String), change Nullable(String), status_code Int32) ENGINE = Memory", nil)
	clickhouseHTTP(t, httpURL, "INSERT INTO "+cfg.Database+".parquet_schema FORMAT Parquet", buf.Bytes())
	rows := clickhouseHTTP(t, httpURL, "SELECT surt_key, registered_domain, status_code, error, html IS NULL, content_digest, change FROM "+cfg.Database+".parquet_schema ORDER BY url FORMAT TSV", nil)
	wantRows := "uk,co,example,shop)/broken\texample.co.uk\t500\tboom\t1\t\\N\t\\N\n" +
		"uk,co,example,shop)/nodns\texample.co.uk\t0\tdns\t1\t\\N\t\\N\n" +
		"uk,co,example,shop)/kept?q=1\texample.co.uk\t200\t\\N\t0\tsha1:" + sha1Base32("<p>Kept</p>") + "\tsame\n" +
		"uk,co,example,shop:8443)/a?a=1&b=2\texample.co.uk\t200\t\\N\t0\tsha1:" + sha1Base32("<p>A</p>") + "\tnew\n"
	if rows != wantRows {
		t.Fatalf("read back\n%s\nwant\n%s", rows, wantRows)
	}
	var warc bytes.Buffer
	if _, err := r.ExportWARC(context.Background(), jobB, query.WARCOptions{}, &warc); err != nil {
		t.Fatal(err)
	}
	pointers := clickhouseHTTP(t, httpURL, "SELECT url, warc_filename, warc_offset, warc_length FROM "+cfg.Database+".parquet_schema ORDER BY url FORMAT TSV", nil)
	checkWARCPointers(t, pointers, warc.Bytes(), query.WARCFileName(uuid.MustParse(jobB)))
	// Each page's surt_key is its key in the CDXJ index.
	var index bytes.Buffer
	if _, err := r.ExportCDXJ(context.Background(), jobB, query.WARCOptions{}, &index); err != nil {
		t.Fatal(err)
	}
	var cdxjKeys []string
	for _, c := range parseCDXJ(t, index.String()) {
		if c.Mime == "text/html" {
			cdxjKeys = append(cdxjKeys, c.Key)
		}
	}
	keys := clickhouseHTTP(t, httpURL, "SELECT surt_key FROM "+cfg.Database+".parquet_schema WHERE warc_offset IS NOT NULL ORDER BY surt_key FORMAT TSV", nil)
	if want := strings.Join(cdxjKeys, "\n") + "\n"; keys != want {
		t.Fatalf("surt_key\n%s\nCDXJ keys\n%s", keys, want)
	}
}

// checkWARCPointers checks each row (url, warc_filename, warc_offset,
// warc_length, as TSV) against a WARC export: a page with a record names
// the file and points at one gzip member of it, its response record; the
// page without an HTTP answer is NULL.
func checkWARCPointers(t *testing.T, rows string, warc []byte, file string) {
	t.Helper()
	var got []string
	for _, row := range strings.Split(strings.TrimSuffix(rows, "\n"), "\n") {
		f := strings.Split(row, "\t")
		if f[1] == "\\N" {
			got = append(got, f[0]+" none")
			continue
		}
		off, _ := strconv.Atoi(f[2])
		n, _ := strconv.Atoi(f[3])
		if f[1] != file || off < 0 || n <= 0 || off+n > len(warc) {
			t.Fatalf("row %q: not in %s (%d bytes)", row, file, len(warc))
		}
		zr, err := gzip.NewReader(bytes.NewReader(warc[off : off+n]))
		if err != nil {
			t.Fatalf("row %q: no gzip member there: %v", row, err)
		}
		zr.Multistream(false)
		rec, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("row %q: %v", row, err)
		}
		typ, _, _ := strings.Cut(strings.TrimPrefix(string(rec), "WARC/1.1\r\nWARC-Type: "), "\r\n")
		_, target, _ := strings.Cut(string(rec), "\r\nWARC-Target-URI: ")
		target, _, _ = strings.Cut(target, "\r\n")
		got = append(got, f[0]+" "+typ+" "+target)
	}
	want := "[https://shop.example.co.uk/broken response https://shop.example.co.uk/broken https://shop.example.co.uk/nodns none " +
		"https://www.Shop.example.co.uk/Kept?q=1 response https://www.Shop.example.co.uk/Kept?q=1 " +
		"https://www2.Shop.example.co.uk:8443/A?b=2&a=1#frag response https://www2.Shop.example.co.uk:8443/A?b=2&a=1#frag]"
	if fmt.Sprint(got) != want {
		t.Fatalf("pointers %v\nwant %s", got, want)
	}
}

// sha1Base32 is a digest as the WARC and Parquet exports write it.
func sha1Base32(s string) string {
	sum := sha1.Sum([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])
}
