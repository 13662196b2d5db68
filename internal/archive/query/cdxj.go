package query

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nlnwa/gowarc/v3"
)

// A CDXJ index (format=cdxj, and indexes/index.cdxj in a WACZ) has one line
// per replayable record of the job's WARC export (response, revisit and
// conversion records; not the warcinfo record):
//
//	SURT-key 14-digit-timestamp {"url":…,"mime":…,"status":…,"digest":…,"length":…,"offset":…,"filename":…}
//
// The offset and length are those of the record's gzip member, counted
// while the WARC was written; the digest is its WARC-Payload-Digest without
// the "sha1:" label, status, offset and length are strings: as pywb and
// warcio write them. The lines are sorted by bytes, that is by key, then
// timestamp: the WARC stays in URL order and its lines are sorted apart
// (lineSorter), so that memory stays bounded.
//
// The key of a page is its SURT (surtKey). A markdown conversion record is
// keyed, and its url named, `urn:markdown:` followed by the page's URL, so
// that a lookup of the URL finds its html response alone, and a replay tool
// that files records by URL does not take the markdown for the page.

// markdownURN prefixes the URL of a page's markdown in an index.
const markdownURN = "urn:markdown:"

// recordIndex is told where each record of a WARC lies as it is written.
type recordIndex interface {
	add(indexEntry) error
}

// indexEntry is what a CDXJ line says of one record, with the record's
// type and the page's URL as the archive stores it.
type indexEntry struct {
	typ            gowarc.RecordType
	page           string
	url            string // as in WARC-Target-URI, or markdownURN + it
	at             time.Time
	mime, digest   string
	status         int // of the HTTP answer; 0 for none
	offset, length int64
}

// cdxjLine is the line of e, for a WARC named filename.
func cdxjLine(e indexEntry, filename string) ([]byte, error) {
	fields := struct {
		URL      string `json:"url"`
		Mime     string `json:"mime"`
		Status   string `json:"status,omitempty"`
		Digest   string `json:"digest,omitempty"`
		Length   string `json:"length"`
		Offset   string `json:"offset"`
		Filename string `json:"filename"`
	}{URL: e.url, Mime: e.mime, Digest: strings.TrimPrefix(e.digest, "sha1:"), Length: strconv.FormatInt(e.length, 10),
		Offset: strconv.FormatInt(e.offset, 10), Filename: filename}
	if e.status != 0 {
		fields.Status = strconv.Itoa(e.status)
	}
	var b bytes.Buffer
	b.WriteString(surtKey(e.url) + " " + e.at.UTC().Format("20060102150405") + " ")
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil { // ends the line
		return nil, err
	}
	return b.Bytes(), nil
}

var leadingWWW = regexp.MustCompile(`^(https?://)www\d*\.`)

// surtKey is the SURT form of u (a URL as warcURI writes it) that pywb and
// warcio key their indexes by: lower case, without scheme or leading
// www, the host's labels reversed and joined by commas, the port unless
// the scheme's own, ")", the path, and the query's arguments sorted; the
// fragment left out. A URL that is not http(s), or does not parse, is its
// own key. A key never holds a space or a control character (a line's
// separators): those are percent-encoded.
func surtKey(u string) string {
	if !strings.HasPrefix(u, "http:") && !strings.HasPrefix(u, "https:") {
		return warcURI(u)
	}
	p, err := url.Parse(strings.ToLower(leadingWWW.ReplaceAllString(u, "$1")))
	if err != nil || p.Host == "" {
		return warcURI(strings.ToLower(u))
	}
	labels := strings.Split(p.Hostname(), ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	var b strings.Builder
	b.WriteString(strings.Join(labels, ","))
	if port := p.Port(); port != "" && !(p.Scheme == "http" && port == "80") && !(p.Scheme == "https" && port == "443") {
		b.WriteString(":" + port)
	}
	b.WriteByte(')')
	path := p.EscapedPath()
	if path == "" {
		path = "/"
	}
	b.WriteString(path)
	if p.RawQuery != "" {
		args := strings.Split(p.RawQuery, "&")
		sort.Strings(args)
		b.WriteString("?" + strings.Join(args, "&"))
	}
	return warcURI(b.String())
}

// cdxjIndex gathers a WARC's CDXJ lines as its records are written.
type cdxjIndex struct {
	filename string
	lines    *lineSorter
}

func (x *cdxjIndex) add(e indexEntry) error {
	line, err := cdxjLine(e, x.filename)
	if err != nil {
		return err
	}
	return x.lines.add(line)
}

// ExportCDXJ writes the CDXJ index of job's WARC export (ExportWARC with
// the same options, which writes the same bytes as long as the job's rows
// do not change), sorted, and returns the bytes written. The WARC is built
// to learn its offsets, and thrown away; the lines are sorted in bounded
// memory (lineSorter).
func (r *Reader) ExportCDXJ(ctx context.Context, job string, opts WARCOptions, w io.Writer) (int64, error) {
	id, err := r.exportJob(ctx, job)
	if err != nil {
		return 0, err
	}
	lines := newLineSorter("", sortRunBytes)
	defer lines.close()
	ww := newWARCWriter(io.Discard, id)
	ww.index = &cdxjIndex{filename: WARCFileName(id), lines: lines}
	if _, err := r.writeWARC(ctx, id, opts, ww); err != nil {
		return 0, err
	}
	return lines.writeTo(w)
}
