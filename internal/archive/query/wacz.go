package query

import (
	"archive/zip"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/version"
)

// A WACZ export (WACZ 1.1.1) is one zip holding, in this order:
//
//   - archive/data.warc.gz: the job's self-contained WARC export (as
//     ExportWARC writes it), stored, not deflated, so that a replay tool
//     reads a record at its offset without inflating the file;
//   - indexes/index.cdxj: its CDXJ index (as ExportCDXJ writes it, the
//     file named data.warc.gz);
//   - pages/pages.jsonl: a header line, then one line per page written as
//     a response record: its id, url, ts (the record's date) and title
//     where the page has one;
//   - datapackage.json: profile data-package, wacz_version 1.1.1, created
//     (the date of the job's last page) and each file above as a resource
//     with its path, sha256 hash and size in bytes.
//
// It is streamed: the WARC goes out as it is written, while its index
// lines go to a lineSorter and its pages to a temporary file, copied out
// after it. Memory stays bounded (sortRunBytes, and a buffer per file);
// the temporary files hold the index and the pages (a few hundred bytes a
// page), and are removed when the export ends.

const (
	// waczWARC is the name of the WARC in a WACZ's archive/, as its index
	// names it.
	waczWARC    = "data.warc.gz"
	waczVersion = "1.1.1"
	pagesHeader = `{"format":"json-pages-1.0","id":"pages","title":"All Pages"}` + "\n"
)

// waczPages spools the lines of pages/pages.jsonl to a temporary file.
type waczPages struct {
	file *os.File
	w    *bufio.Writer
}

func newWACZPages() (*waczPages, error) {
	f, err := os.CreateTemp("", "crawlhouse-pages-*")
	if err != nil {
		return nil, fmt.Errorf("export wacz: %w", err)
	}
	return &waczPages{file: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

func (p *waczPages) add(page warcPage, recordID string) error {
	line, err := json.Marshal(struct {
		ID    string `json:"id"`
		URL   string `json:"url"`
		TS    string `json:"ts"`
		Title string `json:"title,omitempty"`
	}{ID: recordID[len("<urn:uuid:") : len(recordID)-1], URL: warcURI(page.url), TS: page.at.UTC().Format(warcDate), Title: page.title})
	if err != nil {
		return err
	}
	_, err = p.w.Write(append(line, '\n'))
	return err
}

// writeTo writes the header line and the pages.
func (p *waczPages) writeTo(w io.Writer) (int64, error) {
	if err := p.w.Flush(); err != nil {
		return 0, err
	}
	if _, err := p.file.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	n, err := io.WriteString(w, pagesHeader)
	if err != nil {
		return int64(n), err
	}
	m, err := io.Copy(w, p.file)
	return int64(n) + m, err
}

func (p *waczPages) close() {
	p.file.Close()
	os.Remove(p.file.Name())
}

// waczResource is a file of a WACZ as datapackage.json lists it.
type waczResource struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Hash  string `json:"hash"`
	Bytes int64  `json:"bytes"`
}

// waczEntry writes the file path into zw, stored or deflated, with what
// write writes, and returns it as a resource.
func waczEntry(zw *zip.Writer, name string, method uint16, write func(io.Writer) (int64, error)) (waczResource, error) {
	f, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
	if err != nil {
		return waczResource{}, fmt.Errorf("export wacz: %s: %w", name, err)
	}
	sum := sha256.New()
	n, err := write(io.MultiWriter(f, sum))
	if err != nil {
		return waczResource{}, fmt.Errorf("export wacz: %s: %w", name, err)
	}
	return waczResource{Name: path.Base(name), Path: name, Hash: "sha256:" + hex.EncodeToString(sum.Sum(nil)), Bytes: n}, nil
}

// ExportWACZ writes job as a WACZ file and returns the bytes written.
func (r *Reader) ExportWACZ(ctx context.Context, job string, w io.Writer) (int64, error) {
	id, err := r.exportJob(ctx, job)
	if err != nil {
		return 0, err
	}
	lines := newLineSorter("", sortRunBytes)
	defer lines.close()
	pages, err := newWACZPages()
	if err != nil {
		return 0, err
	}
	defer pages.close()
	out := &countingWriter{w: w}
	zw := zip.NewWriter(out)
	var created time.Time
	warc, err := waczEntry(zw, "archive/"+waczWARC, zip.Store, func(f io.Writer) (int64, error) {
		ww := newWARCWriter(f, id)
		ww.index, ww.pages = &cdxjIndex{filename: waczWARC, lines: lines}, pages
		last, err := r.writeWARC(ctx, id, WARCOptions{}, ww)
		created = last
		return ww.n(), err
	})
	if err != nil {
		return out.n, err
	}
	index, err := waczEntry(zw, "indexes/index.cdxj", zip.Deflate, lines.writeTo)
	if err != nil {
		return out.n, err
	}
	pagesRes, err := waczEntry(zw, "pages/pages.jsonl", zip.Deflate, pages.writeTo)
	if err != nil {
		return out.n, err
	}
	pkg, err := json.MarshalIndent(struct {
		Profile     string         `json:"profile"`
		WACZVersion string         `json:"wacz_version"`
		Title       string         `json:"title"`
		Created     string         `json:"created"`
		Software    string         `json:"software"`
		Resources   []waczResource `json:"resources"`
	}{"data-package", waczVersion, "crawlhouse job " + id.String(), created.UTC().Format(warcDate), "crawlhouse " + version.String(),
		[]waczResource{warc, index, pagesRes}}, "", "  ")
	if err != nil {
		return out.n, err
	}
	if _, err := waczEntry(zw, "datapackage.json", zip.Deflate, func(f io.Writer) (int64, error) {
		n, err := f.Write(pkg)
		return int64(n), err
	}); err != nil {
		return out.n, err
	}
	if err := zw.Close(); err != nil {
		return out.n, fmt.Errorf("export wacz: %w", err)
	}
	return out.n, out.err
}
