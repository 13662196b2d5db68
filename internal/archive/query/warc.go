package query

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/version"
	"github.com/google/uuid"
	"github.com/klauspost/compress/gzip"
	"github.com/nlnwa/gowarc/v3"
)

// A WARC export is WARC 1.1 (ISO 28500:2017), gzipped one member per
// record (`.warc.gz`), so that an index can point at any record and a
// reader can start there. The records are built and checked by gowarc.
//
// The file opens with a `warcinfo` record; every other record names it in
// WARC-Warcinfo-ID. Each page that had an HTTP answer is a `response`
// record whose block is an HTTP message with the page's real status line
// (a 404 replays as a 404, never as a good page), a Content-Type of html
// and the html the crawl API kept as its body (the crawl API does not send
// the exchange itself, so the other HTTP headers are not there). A page
// with markdown also gets a `conversion` record that refers to the
// response (WARC-Refers-To). A page without any HTTP answer (status 0: the
// scrape failed before one) has nothing a replay tool could show: it is
// left out, and the warcinfo record counts it (`crawlhouse-unanswered`).
//
// By default the file is self-contained: every URL replays from it alone.
// With WARCOptions.Revisits, a version whose markdown and html are byte for
// byte those of the URL's previous version (the one page_changes compares
// it with) is one `revisit` record instead (profile
// identical-payload-digest) that refers to that version's URL and date in
// the previous job's export, for incremental chains.
const warcDate = "2006-01-02T15:04:05.000Z"

// WARCOptions are the choices a WARC export takes.
type WARCOptions struct {
	// Revisits writes an unchanged version as a revisit record pointing
	// into the previous job's export instead of a full response.
	Revisits bool
}

// previousVersion is what a revisit record needs of the version before.
type previousVersion struct {
	receivedAt time.Time
	hash       uint64
}

// warcPage is one row of a WARC export.
type warcPage struct {
	url, markdown, html string
	at                  time.Time
	status              uint16
	hash                uint64
}

// ExportWARC writes the pages of job as gzipped WARC 1.1 records and
// returns the bytes written.
func (r *Reader) ExportWARC(ctx context.Context, job string, opts WARCOptions, w io.Writer) (int64, error) {
	id, err := r.exportJob(ctx, job)
	if err != nil {
		return 0, err
	}
	var unanswered uint64
	if err := r.conn.QueryRow(exporting(ctx), "SELECT count() FROM "+r.db+".pages FINAL WHERE crawl_id = {job:UUID} AND status_code = 0",
		clickhouse.Named("job", id.String())).Scan(&unanswered); err != nil {
		return 0, readErr("export", err)
	}
	prev := noPreviousVersions()
	if opts.Revisits {
		if prev, err = r.previousVersions(ctx, id); err != nil {
			return 0, err
		}
	}
	defer prev.close()
	rows, err := r.conn.Query(exporting(ctx), "SELECT url, received_at, status_code, markdown, html, cityHash64(content) FROM "+r.db+
		".pages FINAL WHERE crawl_id = {job:UUID} AND status_code != 0 ORDER BY url", clickhouse.Named("job", id.String()))
	if err != nil {
		return 0, readErr("export", err)
	}
	defer rows.Close()
	ww := newWARCWriter(w)
	if err := ww.info(id, unanswered, opts); err != nil {
		return ww.n(), err
	}
	var p warcPage
	for rows.Next() {
		if err := rows.Scan(&p.url, &p.at, &p.status, &p.markdown, &p.html, &p.hash); err != nil {
			return ww.n(), readErr("export", err)
		}
		if err := ww.page(p, prev); err != nil {
			return ww.n(), err
		}
	}
	if err := rows.Err(); err != nil {
		return ww.n(), readErr("export", err)
	}
	if prev.err != nil {
		return ww.n(), prev.err
	}
	return ww.n(), ww.flush()
}

// warcWriter writes records, each its own gzip member.
type warcWriter struct {
	out    *countingWriter
	buf    *bufio.Writer
	gz     *gzip.Writer
	m      gowarc.Marshaler
	infoID string
}

func newWARCWriter(w io.Writer) *warcWriter {
	buf := bufio.NewWriterSize(w, 256<<10)
	out := &countingWriter{w: buf}
	return &warcWriter{out: out, buf: buf, gz: gzip.NewWriter(out), m: gowarc.NewMarshaler(), infoID: newRecordID()}
}

func (ww *warcWriter) n() int64 { return ww.out.n }

func (ww *warcWriter) flush() error {
	if ww.out.err != nil {
		return ww.out.err
	}
	return ww.buf.Flush()
}

// info writes the warcinfo record.
func (ww *warcWriter) info(job uuid.UUID, unanswered uint64, opts WARCOptions) error {
	revisits := "none: every page is a full response record"
	if opts.Revisits {
		revisits = "previous: pages unchanged since the previous job are revisit records pointing into its export"
	}
	fields := "software: crawlhouse " + version.String() + "\r\nformat: WARC File Format 1.1\r\n" +
		"description: pages of job " + job.String() + " as archived by crawlhouse; html as response records, markdown as conversion records\r\n" +
		"crawlhouse-job: " + job.String() + "\r\n" +
		"crawlhouse-unanswered: " + strconv.FormatUint(unanswered, 10) + "\r\n" +
		"crawlhouse-revisits: " + revisits + "\r\n"
	_, err := ww.record(gowarc.Warcinfo, ww.infoID, time.Now(), [][2]string{{gowarc.ContentType, gowarc.ApplicationWarcFields}}, fields)
	return err
}

// page writes the records of one page: a response and a conversion, or a
// revisit.
func (ww *warcWriter) page(p warcPage, prev *previousVersions) error {
	target := [2]string{gowarc.WarcTargetURI, warcURI(p.url)}
	if pv, ok := prev.of(p.url); ok && pv.hash == p.hash {
		_, err := ww.record(gowarc.Revisit, newRecordID(), p.at, [][2]string{target,
			{gowarc.WarcProfile, gowarc.ProfileIdenticalPayloadDigestV1_1},
			{gowarc.WarcRefersToTargetURI, warcURI(p.url)},
			{gowarc.WarcRefersToDate, pv.receivedAt.UTC().Format(warcDate)},
			{gowarc.WarcPayloadDigest, "sha1:" + sha1Base32(p.html)},
			{gowarc.ContentType, "application/http; msgtype=response"}}, httpHead(p.status, len(p.html)))
		return err
	}
	resID := newRecordID()
	if _, err := ww.record(gowarc.Response, resID, p.at, [][2]string{target,
		{gowarc.ContentType, "application/http; msgtype=response"}}, httpHead(p.status, len(p.html))+p.html); err != nil {
		return err
	}
	if p.markdown == "" {
		return nil
	}
	_, err := ww.record(gowarc.Conversion, newRecordID(), p.at, [][2]string{target,
		{gowarc.WarcRefersTo, resID}, {gowarc.ContentType, "text/markdown; charset=utf-8"}}, p.markdown)
	return err
}

// httpHead is the HTTP head of a page's response record: its real status,
// the html's type and length. The status comes from the crawled site and
// is any number the column holds; the reason phrase is Go's, or none.
func httpHead(status uint16, length int) string {
	return "HTTP/1.1 " + strconv.Itoa(int(status)) + " " + http.StatusText(int(status)) + "\r\n" +
		"Content-Type: text/html; charset=utf-8\r\nContent-Length: " + strconv.Itoa(length) + "\r\n\r\n"
}

// record builds one record through gowarc, which adds the digests and
// Content-Length and refuses a record it finds invalid, and writes it as
// one gzip member.
func (ww *warcWriter) record(typ gowarc.RecordType, id string, at time.Time, headers [][2]string, block string) (int64, error) {
	rb := gowarc.NewRecordBuilder(typ, gowarc.WithStrictValidation(), gowarc.WithAddMissingDigest(true),
		gowarc.WithDefaultDigestAlgorithm("sha1"), gowarc.WithBufferMaxMemBytes(1<<20))
	rb.AddWarcHeader(gowarc.WarcRecordID, id)
	rb.AddWarcHeaderTime(gowarc.WarcDate, at.UTC())
	if typ != gowarc.Warcinfo {
		rb.AddWarcHeader(gowarc.WarcWarcinfoID, ww.infoID)
	}
	for _, h := range headers {
		rb.AddWarcHeader(h[0], h[1])
	}
	if _, err := rb.WriteString(block); err != nil {
		rb.Close()
		return 0, fmt.Errorf("export warc: %w", err)
	}
	rec, _, err := rb.Build()
	if err != nil {
		return 0, fmt.Errorf("export warc: %s record: %w", typ, err)
	}
	defer rec.Close()
	start := ww.out.n
	ww.gz.Reset(ww.out)
	if _, _, err := ww.m.Marshal(ww.gz, rec, 0); err != nil {
		return ww.out.n - start, fmt.Errorf("export warc: %w", err)
	}
	if err := ww.gz.Close(); err != nil {
		return ww.out.n - start, fmt.Errorf("export warc: %w", err)
	}
	return ww.out.n - start, ww.out.err
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

// noPreviousVersions is the cursor of an export without revisits.
func noPreviousVersions() *previousVersions { return &previousVersions{done: true} }

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

func (p *previousVersions) close() {
	if p.rows != nil {
		p.rows.Close()
	}
}

func newRecordID() string { return "<urn:uuid:" + uuid.NewString() + ">" }

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

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}
