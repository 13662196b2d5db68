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
//
// The export is deterministic, so that an index taken of one download
// (ExportCDXJ) holds for any other: record ids are derived from the job,
// the record's type and the URL (recordID), the warcinfo record is dated
// when the job's last page was received, and the gzip members carry no
// modification time. Each record's place (offset and length of its gzip
// member) and payload digest go to the writer's index as it is written.
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
	url, title, markdown, html string
	at                         time.Time
	status                     uint16
	hash                       uint64
}

// WARCFileName is the name of job's WARC export, as the read API names its
// download and as the CDXJ index names it.
func WARCFileName(job uuid.UUID) string { return "job-" + job.String() + ".warc.gz" }

// ExportWARC writes the pages of job as gzipped WARC 1.1 records and
// returns the bytes written.
func (r *Reader) ExportWARC(ctx context.Context, job string, opts WARCOptions, w io.Writer) (int64, error) {
	id, err := r.exportJob(ctx, job)
	if err != nil {
		return 0, err
	}
	ww := newWARCWriter(w, id)
	_, err = r.writeWARC(ctx, id, opts, ww)
	return ww.n(), err
}

// writeWARC writes the records of job through ww and returns the date of
// its warcinfo record: that of the job's last page.
func (r *Reader) writeWARC(ctx context.Context, id uuid.UUID, opts WARCOptions, ww *warcWriter) (time.Time, error) {
	var (
		unanswered uint64
		last       time.Time
	)
	if err := r.conn.QueryRow(exporting(ctx), "SELECT countIf(status_code = 0), max(received_at) FROM "+r.db+".pages FINAL WHERE crawl_id = {job:UUID}",
		clickhouse.Named("job", id.String())).Scan(&unanswered, &last); err != nil {
		return last, readErr("export", err)
	}
	prev := notInStep[previousVersion]()
	if opts.Revisits {
		var err error
		if prev, err = r.previousVersions(ctx, id); err != nil {
			return last, err
		}
	}
	defer prev.close()
	rows, err := r.conn.Query(exporting(ctx), "SELECT url, title, received_at, status_code, markdown, html, cityHash64(content) FROM "+r.db+
		".pages FINAL WHERE crawl_id = {job:UUID} AND status_code != 0 ORDER BY url", clickhouse.Named("job", id.String()))
	if err != nil {
		return last, readErr("export", err)
	}
	defer rows.Close()
	if err := ww.info(last, unanswered, opts); err != nil {
		return last, err
	}
	var p warcPage
	for rows.Next() {
		if err := rows.Scan(&p.url, &p.title, &p.at, &p.status, &p.markdown, &p.html, &p.hash); err != nil {
			return last, readErr("export", err)
		}
		if err := ww.page(p, prev); err != nil {
			return last, err
		}
	}
	if err := rows.Err(); err != nil {
		return last, readErr("export", err)
	}
	if prev.err != nil {
		return last, prev.err
	}
	return last, ww.flush()
}

// warcWriter writes records, each its own gzip member. With an index, it
// tells it where each record lies; with pages, each page it writes as a
// response.
type warcWriter struct {
	out    *countingWriter
	buf    *bufio.Writer
	gz     *gzip.Writer
	m      gowarc.Marshaler
	job    uuid.UUID
	infoID string
	index  recordIndex
	pages  *waczPages
}

func newWARCWriter(w io.Writer, job uuid.UUID) *warcWriter {
	buf := bufio.NewWriterSize(w, 256<<10)
	out := &countingWriter{w: buf}
	return &warcWriter{out: out, buf: buf, gz: gzip.NewWriter(out), m: gowarc.NewMarshaler(), job: job, infoID: recordID(job, gowarc.Warcinfo, "")}
}

func (ww *warcWriter) n() int64 { return ww.out.n }

func (ww *warcWriter) flush() error {
	if ww.out.err != nil {
		return ww.out.err
	}
	return ww.buf.Flush()
}

// info writes the warcinfo record, dated at.
func (ww *warcWriter) info(at time.Time, unanswered uint64, opts WARCOptions) error {
	revisits := "none: every page is a full response record"
	if opts.Revisits {
		revisits = "previous: pages unchanged since the previous job are revisit records pointing into its export"
	}
	job := ww.job.String()
	fields := "software: crawlhouse " + version.String() + "\r\nformat: WARC File Format 1.1\r\n" +
		"description: pages of job " + job + " as archived by crawlhouse; html as response records, markdown as conversion records\r\n" +
		"crawlhouse-job: " + job + "\r\n" +
		"crawlhouse-unanswered: " + strconv.FormatUint(unanswered, 10) + "\r\n" +
		"crawlhouse-revisits: " + revisits + "\r\n"
	_, _, err := ww.record(gowarc.Warcinfo, ww.infoID, at, [][2]string{{gowarc.ContentType, gowarc.ApplicationWarcFields}}, fields)
	return err
}

// page writes the records of one page: a response and a conversion, or a
// revisit, and tells the index and the pages where they lie.
func (ww *warcWriter) page(p warcPage, prev *inStep[previousVersion]) error {
	target := [2]string{gowarc.WarcTargetURI, warcURI(p.url)}
	entry := indexEntry{url: target[1], at: p.at, status: int(p.status)}
	if pv, ok := prev.of(p.url); ok && pv.hash == p.hash {
		entry.mime = "warc/revisit"
		return ww.indexed(entry, gowarc.Revisit, p.url, p.at, [][2]string{target,
			{gowarc.WarcProfile, gowarc.ProfileIdenticalPayloadDigestV1_1},
			{gowarc.WarcRefersToTargetURI, warcURI(p.url)},
			{gowarc.WarcRefersToDate, pv.receivedAt.UTC().Format(warcDate)},
			{gowarc.WarcPayloadDigest, "sha1:" + sha1Base32(p.html)},
			{gowarc.ContentType, "application/http; msgtype=response"}}, httpHead(p.status, len(p.html)))
	}
	entry.mime = "text/html"
	if err := ww.indexed(entry, gowarc.Response, p.url, p.at, [][2]string{target,
		{gowarc.ContentType, "application/http; msgtype=response"}}, httpHead(p.status, len(p.html))+p.html); err != nil {
		return err
	}
	if ww.pages != nil {
		if err := ww.pages.add(p, recordID(ww.job, gowarc.Response, p.url)); err != nil {
			return err
		}
	}
	if p.markdown == "" {
		return nil
	}
	entry = indexEntry{url: markdownURN + target[1], at: p.at, mime: "text/markdown"}
	return ww.indexed(entry, gowarc.Conversion, p.url, p.at, [][2]string{target,
		{gowarc.WarcRefersTo, recordID(ww.job, gowarc.Response, p.url)},
		{gowarc.WarcPayloadDigest, "sha1:" + sha1Base32(p.markdown)},
		{gowarc.ContentType, "text/markdown; charset=utf-8"}}, p.markdown)
}

// indexed writes the record of type typ of the page at url and adds entry,
// with the record's place and payload digest, to the index.
func (ww *warcWriter) indexed(entry indexEntry, typ gowarc.RecordType, url string, at time.Time, headers [][2]string, block string) error {
	entry.typ, entry.page, entry.offset = typ, url, ww.out.n
	length, digest, err := ww.record(typ, recordID(ww.job, typ, url), at, headers, block)
	if err != nil || ww.index == nil {
		return err
	}
	entry.length, entry.digest = length, digest
	return ww.index.add(entry)
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
//
// It returns the member's length and the record's WARC-Payload-Digest.
func (ww *warcWriter) record(typ gowarc.RecordType, id string, at time.Time, headers [][2]string, block string) (int64, string, error) {
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
		return 0, "", fmt.Errorf("export warc: %w", err)
	}
	rec, _, err := rb.Build()
	if err != nil {
		return 0, "", fmt.Errorf("export warc: %s record: %w", typ, err)
	}
	defer rec.Close()
	start := ww.out.n
	ww.gz.Reset(ww.out)
	if _, _, err := ww.m.Marshal(ww.gz, rec, 0); err != nil {
		return ww.out.n - start, "", fmt.Errorf("export warc: %w", err)
	}
	if err := ww.gz.Close(); err != nil {
		return ww.out.n - start, "", fmt.Errorf("export warc: %w", err)
	}
	return ww.out.n - start, rec.WarcHeader().Get(gowarc.WarcPayloadDigest), ww.out.err
}

// previousVersions reads, in URL order, the previous version of each URL
// of job that has one, in step with the export's rows.
func (r *Reader) previousVersions(ctx context.Context, job uuid.UUID) (*inStep[previousVersion], error) {
	return readInStep(ctx, r, "export: previous versions", "SELECT url, received_at, cityHash64(content) FROM "+r.db+".pages FINAL "+
		"WHERE (crawl_id, url) GLOBAL IN (SELECT assumeNotNull(previous_crawl_id), url FROM "+r.db+".page_changes "+
		"WHERE crawl_id = {job:UUID} AND previous_crawl_id IS NOT NULL) ORDER BY url", job,
		func(rows driver.Rows, url *string, v *previousVersion) error {
			return rows.Scan(url, &v.receivedAt, &v.hash)
		})
}

// recordID is the WARC-Record-ID of job's record of type typ for url (""
// for the warcinfo record): derived from them, never random, so that an
// export of the same rows is the same bytes (its index's offsets hold for
// any download of it). A page has at most one record of each type.
func recordID(job uuid.UUID, typ gowarc.RecordType, url string) string {
	return "<urn:uuid:" + uuid.NewSHA1(job, []byte(typ.String()+" "+url)).String() + ">"
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

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}
