package reader

import (
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// An export is compressed on request: a client that accepts zstd gets
// zstd, else one that accepts gzip gets gzip, else the bytes as they are
// (Content-Encoding, RFC 9110 §8.4). The encoders are streaming ones with
// bounded windows (zstd on one goroutine), so an export's memory stays
// bounded whatever its size. A WARC (.warc.gz) or a Parquet file is
// compressed already and gains little; it is still encoded when asked, so
// that a client's choice means the same for every format.

// exportEncoding is the Content-Encoding an Accept-Encoding asks for
// among those the exports offer: "zstd", "gzip" or "" (identity).
func exportEncoding(accept string) string {
	var zstdOK, gzipOK bool
	for _, part := range strings.Split(accept, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !acceptable(params) {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "zstd":
			zstdOK = true
		case "gzip", "x-gzip":
			gzipOK = true
		}
	}
	switch {
	case zstdOK:
		return "zstd"
	case gzipOK:
		return "gzip"
	}
	return ""
}

// acceptable reports whether a coding's parameters leave it acceptable:
// any q but 0.
func acceptable(params string) bool {
	for _, p := range strings.Split(params, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(strings.TrimSpace(name), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return err == nil && q > 0
		}
	}
	return true
}

// encoder wraps w in the encoding's writer; Close ends the encoded stream
// (and must not be called on an export that failed: a cut stream must not
// end as if whole). The identity encoding closes nothing.
func encoder(encoding string, w io.Writer) (io.WriteCloser, error) {
	switch encoding {
	case "zstd":
		return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
	case "gzip":
		return gzip.NewWriter(w), nil
	}
	return nopCloser{w}, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// setEncoding adds the headers of an encoded answer.
func setEncoding(h http.Header, encoding string) {
	h.Add("Vary", "Accept-Encoding")
	if encoding != "" {
		h.Set("Content-Encoding", encoding)
	}
}

// release frees an encoder whose stream is abandoned without ending it in
// the answer: its end goes nowhere.
func release(enc io.WriteCloser) {
	if r, ok := enc.(interface{ Reset(io.Writer) }); ok {
		r.Reset(io.Discard)
		_ = enc.Close()
	}
}
