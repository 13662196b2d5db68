package query

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/version"
	"github.com/google/uuid"
)

// Exports stream one job's pages (every row of `pages FINAL` of the job,
// by URL) to a writer as they are read: nothing of the job is held in
// memory but the block ClickHouse is sending. Each first checks that the
// job exists (ErrNoCrawl). An error after the first byte is returned as is:
// the caller (an HTTP answer already started) must break the stream rather
// than end it as if it were whole.

// ExportNDJSON writes the Documents of job, one per line, each byte for
// byte as the crawl API sent it, and returns the bytes written.
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
	rows, err := r.conn.Query(exporting(ctx), "SELECT document_cut, content, markdown_bytes FROM "+r.db+".pages FINAL WHERE crawl_id = {job:UUID} ORDER BY url",
		clickhouse.Named("job", id.String()))
	if err != nil {
		return 0, readErr("export", err)
	}
	defer rows.Close()
	var (
		n            int64
		cut, content string
		mdBytes      uint32
		buf          = make([]byte, 0, 2*exportChunk)
	)
	for rows.Next() {
		if err := rows.Scan(&cut, &content, &mdBytes); err != nil {
			return n, readErr("export", err)
		}
		buf = append(archive.AppendDocument(buf, cut, content, mdBytes), '\n')
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

// exportChunk is the size of an export's writes.
const exportChunk = 1 << 20

func (r *Reader) exportJob(ctx context.Context, job string) (uuid.UUID, error) {
	id, err := uuid.Parse(job)
	if err != nil {
		return uuid.Nil, invalid("job", "not a job id (a UUID)")
	}
	return id, r.ensureJob(ctx, id)
}

// ErrNoHTTP: the Parquet export needs ClickHouse's HTTP interface, which
// is not configured.
var ErrNoHTTP = fmt.Errorf("the ClickHouse HTTP interface is not configured (CLICKHOUSE_HTTP_URL)")

// parquetColumns are the columns of a Parquet export.
const parquetColumns = "toString(crawl_id) AS crawl_id, toString(job_kind) AS job_kind, url, toString(host) AS host, title, status_code, success, " +
	"toString(origin) AS origin, received_at, error, markdown, html, document"

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
	// The columns keep their names, some as strings: the WHERE reads the
	// columns, not the aliases.
	params.Set("prefer_column_name_to_alias", "1")
	u.RawQuery = params.Encode()
	query := "SELECT " + parquetColumns + " FROM " + r.db + ".pages FINAL WHERE crawl_id = {job:UUID} ORDER BY url FORMAT Parquet"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(query))
	if err != nil {
		return 0, err
	}
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

// WARC 1.1 (ISO 28500:2017). Each page version becomes a `resource` record
// of its html (Content-Type text/html: what the crawl API kept of the
// page, not the HTTP exchange, which it does not send) and a `conversion`
// record of its markdown that refers to it (WARC-Refers-To). A version
// whose markdown and html are byte for byte those of the URL's previous
// version (the one page_changes compares it with) becomes one `revisit`
// record instead (profile identical-payload-digest), referring to that
// version's URL and date. The file opens with a `warcinfo` record.
const (
	warcRevisitProfile = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
	warcDate           = "2006-01-02T15:04:05.000Z"
)

// previousVersion is what a revisit record needs of the version before.
type previousVersion struct {
	receivedAt time.Time
	hash       uint64
}

// ExportWARC writes the pages of job as WARC 1.1 records.
func (r *Reader) ExportWARC(ctx context.Context, job string, w io.Writer) (int64, error) {
	id, err := r.exportJob(ctx, job)
	if err != nil {
		return 0, err
	}
	prev, err := r.previousVersions(ctx, id)
	if err != nil {
		return 0, err
	}
	defer prev.close()
	rows, err := r.conn.Query(exporting(ctx), "SELECT url, received_at, status_code, toString(job_kind), markdown, html, cityHash64(content) FROM "+r.db+
		".pages FINAL WHERE crawl_id = {job:UUID} ORDER BY url", clickhouse.Named("job", id.String()))
	if err != nil {
		return 0, readErr("export", err)
	}
	defer rows.Close()
	cw := &countingWriter{w: bufio.NewWriterSize(w, 256<<10)}
	info := "software: crawlhouse " + version.String() + "\r\nformat: WARC File Format 1.1\r\n" +
		"description: pages of job " + id.String() + " as archived by crawlhouse; html as resource records, markdown as conversion records\r\n"
	writeRecord(cw, "warcinfo", []string{"Content-Type: application/warc-fields"}, time.Now().UTC(), info)
	var (
		u, kind, markdown, html string
		at                      time.Time
		status                  uint16
		hash                    uint64
	)
	for rows.Next() {
		if err := rows.Scan(&u, &at, &status, &kind, &markdown, &html, &hash); err != nil {
			return cw.n, readErr("export", err)
		}
		target := "WARC-Target-URI: " + warcURI(u)
		extra := []string{"WARC-Crawlhouse-Job: " + id.String(), "WARC-Crawlhouse-Status: " + strconv.Itoa(int(status))}
		digest := "sha1:" + sha1Base32(html)
		if p, ok := prev.of(u); ok && p.hash == hash {
			writeRecord(cw, "revisit", append([]string{target, "WARC-Profile: " + warcRevisitProfile,
				"WARC-Refers-To-Target-URI: " + warcURI(u), "WARC-Refers-To-Date: " + p.receivedAt.UTC().Format(warcDate),
				"WARC-Payload-Digest: " + digest}, extra...), at, "")
		} else {
			resID := newRecordID()
			writeRecordID(cw, resID, "resource", append([]string{target, "Content-Type: text/html; charset=utf-8",
				"WARC-Payload-Digest: " + digest, "WARC-Block-Digest: " + digest}, extra...), at, html)
			md := "sha1:" + sha1Base32(markdown)
			writeRecord(cw, "conversion", append([]string{target, "WARC-Refers-To: " + resID, "Content-Type: text/markdown; charset=utf-8",
				"WARC-Payload-Digest: " + md, "WARC-Block-Digest: " + md}, extra...), at, markdown)
		}
		if cw.err != nil {
			return cw.n, cw.err
		}
	}
	if err := rows.Err(); err != nil {
		return cw.n, readErr("export", err)
	}
	if prev.err != nil {
		return cw.n, prev.err
	}
	if cw.err != nil {
		return cw.n, cw.err
	}
	return cw.n, cw.w.(*bufio.Writer).Flush()
}

// previousVersions reads, in URL order, the previous version of each URL
// of job that has one: beside the export's own rows, also in URL order, so
// that the two are read in step and nothing of the job is held in memory.
func (r *Reader) previousVersions(ctx context.Context, job uuid.UUID) (*previousVersions, error) {
	rows, err := r.conn.Query(exporting(ctx), "SELECT url, received_at, cityHash64(content) FROM "+r.db+".pages FINAL "+
		"WHERE (crawl_id, url) GLOBAL IN (SELECT assumeNotNull(previous_crawl_id), url FROM "+r.db+".page_changes "+
		"WHERE crawl_id = {job:UUID} AND previous_crawl_id IS NOT NULL) ORDER BY url", clickhouse.Named("job", job.String()))
	if err != nil {
		return nil, readErr("export: previous versions", err)
	}
	p := &previousVersions{rows: rows}
	p.advance()
	return p, nil
}

// previousVersions is a cursor over the previous versions, by URL.
type previousVersions struct {
	rows driver.Rows
	url  string // of cur; "" past the last
	cur  previousVersion
	done bool
	err  error
}

func (p *previousVersions) advance() {
	if p.done {
		return
	}
	if !p.rows.Next() {
		p.done, p.url = true, ""
		if err := p.rows.Err(); err != nil {
			p.err = readErr("export: previous versions", err)
		}
		return
	}
	if err := p.rows.Scan(&p.url, &p.cur.receivedAt, &p.cur.hash); err != nil {
		p.done, p.url, p.err = true, "", readErr("export: previous versions", err)
	}
}

// of returns the previous version of u, given URLs in ascending order
// (the order ClickHouse and Go compare strings in: by bytes).
func (p *previousVersions) of(u string) (previousVersion, bool) {
	for !p.done && p.url < u {
		p.advance()
	}
	return p.cur, !p.done && p.url == u
}

func (p *previousVersions) close() { p.rows.Close() }

func newRecordID() string { return "<urn:uuid:" + uuid.NewString() + ">" }

func writeRecord(w *countingWriter, typ string, headers []string, at time.Time, block string) {
	writeRecordID(w, newRecordID(), typ, headers, at, block)
}

// writeRecordID writes one record; the headers' values are the archive's
// (URLs made safe by warcURI), never a raw line break.
func writeRecordID(w *countingWriter, id, typ string, headers []string, at time.Time, block string) {
	w.write("WARC/1.1\r\nWARC-Type: " + typ + "\r\nWARC-Record-ID: " + id + "\r\nWARC-Date: " + at.UTC().Format(warcDate) + "\r\n")
	for _, h := range headers {
		w.write(h + "\r\n")
	}
	w.write("Content-Length: " + strconv.Itoa(len(block)) + "\r\n\r\n")
	w.write(block)
	w.write("\r\n\r\n")
}

// warcURI is a URL as a header value: a URL from a crawled site is hostile,
// and a control character or space in it would end or split the header.
func warcURI(u string) string {
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		c := u[i]
		if c <= ' ' || c >= 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func sha1Base32(s string) string {
	sum := sha1.Sum([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])
}

// countingWriter counts what it writes and keeps its first error.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) write(s string) {
	if c.err != nil {
		return
	}
	n, err := io.WriteString(c.w, s)
	c.n += int64(n)
	c.err = err
}
