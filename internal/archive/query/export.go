package query

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/google/uuid"
)

// Exports stream one job's pages (every row of `pages FINAL` of the job,
// by URL) to a writer as they are read: nothing of the job is held in
// memory but the block ClickHouse is sending. Each first checks that the
// job exists (ErrNoCrawl). An error after the first byte is returned as is:
// the caller (an HTTP answer already started) must break the stream rather
// than end it as if it were whole.

// ExportNDJSON writes the Documents of job, one per line, each byte for
// byte as the crawl API sent it, and returns the bytes written. A failed
// page's Document is the one exception: the crawl API sends the scrape's
// error beside the Document, not in it, so the line of a page the archive
// counts as failed (events.Failure: the delivery's error, or "HTTP 404"...)
// gains that reason as a top-level "error" member (withError), unless the
// Document has one.
//
// It reads each row's stored parts (document_cut, content, markdown_bytes)
// and splices the Document here (archive.AppendDocument) instead of reading the
// `document` alias, which ClickHouse computes several times slower than it
// reads the parts. Lines are gathered into writes of about exportChunk
// bytes: a job of 20 000 pages is ~700 MB.
func (r *Reader) ExportNDJSON(ctx context.Context, job string, w io.Writer) (int64, error) {
	id, err := r.exportJob(ctx, job)
	if err != nil {
		return 0, err
	}
	rows, err := r.conn.Query(exporting(ctx), "SELECT document_cut, content, markdown_bytes, success, error FROM "+r.db+".pages FINAL WHERE crawl_id = {job:UUID} ORDER BY url",
		clickhouse.Named("job", id.String()))
	if err != nil {
		return 0, readErr("export", err)
	}
	defer rows.Close()
	var (
		n                     int64
		cut, content, errText string
		mdBytes               uint32
		success               bool
		buf                   = make([]byte, 0, 2*exportChunk)
	)
	for rows.Next() {
		if err := rows.Scan(&cut, &content, &mdBytes, &success, &errText); err != nil {
			return n, readErr("export", err)
		}
		start := len(buf)
		buf = archive.AppendDocument(buf, cut, content, mdBytes)
		if !success && errText != "" {
			buf = withError(buf, start, errText)
		}
		buf = append(buf, '\n')
		if len(buf) >= exportChunk {
			m, err := w.Write(buf)
			n += int64(m)
			if err != nil {
				return n, err
			}
			buf = buf[:0]
		}
	}
	if err := rows.Err(); err != nil {
		return n, readErr("export", err)
	}
	if len(buf) == 0 {
		return n, nil
	}
	m, err := w.Write(buf)
	return n + int64(m), err
}

// withError adds errText as the top-level "error" member of the Document
// that b holds from start, unless it has one or is not a JSON object (a row
// stored by hand): then b is left as it is. Only failed pages pay for the
// decoding, and their Documents are small.
func withError(b []byte, start int, errText string) []byte {
	var members map[string]json.RawMessage
	if json.Unmarshal(b[start:], &members) != nil {
		return b
	}
	if _, ok := members["error"]; ok {
		return b
	}
	quoted, err := json.Marshal(errText)
	if err != nil {
		return b
	}
	open := start + bytes.IndexByte(b[start:], '{') + 1
	member := append(append([]byte(`"error":`), quoted...), ',')
	if len(members) == 0 {
		member = member[:len(member)-1]
	}
	return slices.Insert(b, open, member...)
}

// exportChunk is the size of an export's writes.
const exportChunk = 1 << 20

func (r *Reader) exportJob(ctx context.Context, job string) (uuid.UUID, error) {
	id, err := uuid.Parse(job)
	if err != nil {
		return uuid.Nil, invalid("job", "not a job id (a UUID)")
	}
	return id, r.ensureJob(ctx, id)
}

// parquetColumns are the columns of a Parquet export (docs/read-api.md).
// A value that can be missing is NULL, never "" (nullIf); numbers are
// signed (status_code as Int32: engines that map types trip on unsigned
// 16-bit integers). The index columns follow Common Crawl's columnar index:
// surt_key, registered_domain, content_digest (as the WARC export's
// WARC-Payload-Digest: SHA-1 of the html in base 32), mime_type, language
// (as the Document's metadata states it) and change (the class of this
// version, page_changes). warc_filename, warc_offset and warc_length point
// at the page's response record in the job's WARC export (warcpointers.go);
// NULL for a page that has none.
const parquetColumns = "toString(crawl_id) AS crawl_id, toString(job_kind) AS job_kind, url, " +
	surtKeySQL + " AS surt_key, " +
	"toString(host) AS host, nullIf(cutToFirstSignificantSubdomain(url), '') AS registered_domain, " +
	"nullIf(title, '') AS title, toInt32(status_code) AS status_code, success, toString(origin) AS origin, received_at, " +
	"nullIf(error, '') AS error, if(html = '', NULL, concat('sha1:', base32Encode(SHA1(html)))) AS content_digest, " +
	"if(html = '', NULL, 'text/html') AS mime_type, nullIf(JSONExtractString(document, 'metadata', 'language'), '') AS language, " +
	"c.change AS change, if(w.warc_offset IS NULL, NULL, {warc_file:String}) AS warc_filename, w.warc_offset AS warc_offset, w.warc_length AS warc_length, " +
	"nullIf(markdown, '') AS markdown, nullIf(html, '') AS html, document"

// surtKeySQL is the SURT key of url as the CDXJ index writes it
// (surtKey): lower case, no scheme, a leading www (www2...) dropped, the
// host's labels reversed, the port unless the scheme's own, ")", the path
// ("/" if none), the query's arguments sorted, no fragment.
const surtKeySQL = "concat(arrayStringConcat(arrayReverse(splitByChar('.', replaceRegexpOne(domain(lower(url)), '^www\\\\d*\\\\.', ''))), ','), " +
	"if(port(url) IN (0, if(protocol(lower(url)) = 'https', 443, 80)), '', concat(':', toString(port(url)))), ')', " +
	"if(path(lower(url)) = '', '/', path(lower(url))), " +
	"if(queryString(lower(url)) = '', '', concat('?', arrayStringConcat(arraySort(splitByChar('&', queryString(lower(url)))), '&'))))"

// parquetRowGroupRows bounds a Parquet export's row groups: a reader holds
// one group at a time, and a page's html can be large.
const parquetRowGroupRows = 2000

// ExportParquet writes the pages of job as a Parquet file that ClickHouse
// itself writes (FORMAT Parquet, over its HTTP interface: the native
// protocol carries only its own format), copied through as it comes.
func (r *Reader) ExportParquet(ctx context.Context, job string, w io.Writer) (int64, error) {
	if r.httpURL == "" {
		return 0, ErrNoHTTP
	}
	id, err := r.exportJob(ctx, job)
	if err != nil {
		return 0, err
	}
	u, err := url.Parse(r.httpURL)
	if err != nil {
		return 0, fmt.Errorf("CLICKHOUSE_HTTP_URL: %w", err)
	}
	params := url.Values{}
	params.Set("param_job", id.String())
	// The HTTP interface is the one read outside boundConn: the same
	// settings, as the URL's parameters.
	for name, v := range r.limitsOrDefault().settings(true) {
		params.Set(name, fmt.Sprint(v))
	}
	params.Set("output_format_parquet_compression_method", "zstd")
	params.Set("output_format_parquet_row_group_size", strconv.Itoa(parquetRowGroupRows))
	params.Set("output_format_parquet_string_as_string", "1")
	// The columns keep their names, some as strings: the WHERE reads the
	// columns, not the aliases.
	params.Set("prefer_column_name_to_alias", "1")
	pointers, err := r.writeWARCPointers(ctx, id)
	if err != nil {
		return 0, err
	}
	defer pointers.close()
	params.Set("param_warc_file", WARCFileName(id))
	params.Set(warcPointerTable+"_structure", warcPointerStructure)
	params.Set(warcPointerTable+"_format", "RowBinary")
	params.Set("query", "SELECT "+parquetColumns+" FROM "+r.db+".pages AS p FINAL GLOBAL ANY LEFT JOIN (SELECT url AS change_url, toNullable(change) AS change FROM "+r.db+
		".page_changes WHERE crawl_id = {job:UUID}) AS c ON p.url = c.change_url GLOBAL ANY LEFT JOIN (SELECT url AS warc_url, toNullable(offset) AS warc_offset, toNullable(length) AS warc_length FROM "+
		warcPointerTable+") AS w ON p.url = w.warc_url WHERE crawl_id = {job:UUID} ORDER BY url FORMAT Parquet")
	u.RawQuery = params.Encode()
	body, contentType, err := pointers.body()
	if err != nil {
		return 0, fmt.Errorf("export parquet: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-ClickHouse-User", r.user)
	if r.password != "" {
		req.Header.Set("X-ClickHouse-Key", r.password)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("export parquet: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if code, _ := strconv.ParseInt(resp.Header.Get("X-ClickHouse-Exception-Code"), 10, 32); slices.Contains(limitCodes, int32(code)) {
			return 0, fmt.Errorf("export parquet: %w", &limitError{reason: firstLine(string(msg))})
		}
		return 0, fmt.Errorf("export parquet: ClickHouse answered %d: %s", resp.StatusCode, firstLine(string(msg)))
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("export parquet: %w", err)
	}
	// ClickHouse reports an error met after the first bytes in the body's
	// tail, the status already sent.
	if resp.Trailer.Get("X-ClickHouse-Exception-Code") != "" {
		return n, fmt.Errorf("export parquet: ClickHouse failed mid-stream (code %s)", resp.Trailer.Get("X-ClickHouse-Exception-Code"))
	}
	return n, nil
}
