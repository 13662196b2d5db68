package query

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/version"
	"github.com/google/uuid"
)

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
