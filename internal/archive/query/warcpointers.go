package query

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"mime/multipart"
	"os"

	"github.com/google/uuid"
	"github.com/nlnwa/gowarc/v3"
)

// The Parquet export points each page into the job's default WARC export
// (ExportWARC without revisits): warc_filename, warc_offset and
// warc_length, the gzip member of the page's response record. The offsets
// exist only once the WARC is written, so the export first writes the
// WARC (and throws it away: it is the same bytes as any download of it,
// ExportWARC being deterministic), keeping each response record's URL,
// offset and length in a temporary file; ClickHouse then reads that file as
// an external table (the HTTP interface's external data, in RowBinary) and
// joins it to the pages by URL. Memory stays bounded here; ClickHouse holds
// the table, some tens of bytes a page, for the query's time. The cost is
// a WARC pass before the Parquet's first byte (docs/read-api.md).

// warcPointerTable is the external table's name and its structure.
const (
	warcPointerTable     = "warc_pointers"
	warcPointerStructure = "url String, offset Int64, length Int64"
)

// warcPointers is a recordIndex that writes the place of each response
// record, in RowBinary, to a temporary file.
type warcPointers struct {
	file *os.File
	w    *bufio.Writer
	row  []byte
}

func (p *warcPointers) add(e indexEntry) error {
	if e.typ != gowarc.Response {
		return nil
	}
	row := binary.AppendUvarint(p.row[:0], uint64(len(e.page)))
	row = append(row, e.page...)
	row = binary.LittleEndian.AppendUint64(row, uint64(e.offset))
	p.row = binary.LittleEndian.AppendUint64(row, uint64(e.length))
	_, err := p.w.Write(p.row)
	return err
}

func (p *warcPointers) close() {
	p.file.Close()
	os.Remove(p.file.Name())
}

// writeWARCPointers writes job's default WARC export nowhere and returns
// the place of each page's response record in it.
func (r *Reader) writeWARCPointers(ctx context.Context, job uuid.UUID) (*warcPointers, error) {
	f, err := os.CreateTemp("", "crawlhouse-pointers-*")
	if err != nil {
		return nil, fmt.Errorf("export parquet: %w", err)
	}
	p := &warcPointers{file: f, w: bufio.NewWriterSize(f, 64<<10)}
	ww := newWARCWriter(io.Discard, job)
	ww.index = p
	if _, err := r.writeWARC(ctx, job, WARCOptions{}, ww); err != nil {
		p.close()
		return nil, err
	}
	if err := p.w.Flush(); err != nil {
		p.close()
		return nil, fmt.Errorf("export parquet: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		p.close()
		return nil, fmt.Errorf("export parquet: %w", err)
	}
	return p, nil
}

// body is the request body that carries the pointers as external data:
// multipart/form-data with one file, named as the table; and its type.
func (p *warcPointers) body() (io.Reader, string, error) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile(warcPointerTable, warcPointerTable); err != nil {
		return nil, "", err
	}
	n := head.Len()
	if err := mw.Close(); err != nil {
		return nil, "", err
	}
	tail := bytes.Clone(head.Bytes()[n:])
	return io.MultiReader(bytes.NewReader(head.Bytes()[:n]), p.file, bytes.NewReader(tail)), mw.FormDataContentType(), nil
}
