package query

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// A cursor is the position after the last row of a page (a keyset: the
// values of the row's sort key), with the fingerprint of the query it
// belongs to, signed: base64url(JSON) "." base64url(HMAC-SHA256[:16]).
// A cursor that was altered, or given with another query, is refused as
// a ParamError of "cursor" rather than silently giving other rows.
type position struct {
	// Query is the fingerprint of the query the cursor continues.
	Query string `json:"q"`
	// The sort key of the last row; which fields are set depends on the
	// query.
	Time    int64  `json:"t,omitempty"` // Unix milliseconds
	Time2   int64  `json:"t2,omitempty"`
	Score   uint64 `json:"s,omitempty"`
	CrawlID string `json:"c,omitempty"`
	URL     string `json:"u,omitempty"`
	Kind    string `json:"k,omitempty"`
}

func (r *Reader) key() []byte {
	if len(r.cursorKey) == 0 {
		// A Reader not configured for the API: cursors of this process.
		return processKey
	}
	return r.cursorKey
}

var processKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

func (r *Reader) encodeCursor(p position) string {
	// Without HTML escaping: a URL's "&", "<" and ">" stay one byte each,
	// not six, so a cursor stays within maxCursor.
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
	b := []byte(strings.TrimSuffix(buf.String(), "\n"))
	mac := hmac.New(sha256.New, r.key())
	mac.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

// maxCursor bounds a cursor's length: it holds one URL and a few numbers.
// The URL may be as long as any the read side takes (maxURL) and
// JSON-escaped (six bytes for a control character at worst), and the
// whole is base64 (four bytes for three): the archive takes back every
// cursor it writes of a URL it serves.
const maxCursor = (6*maxURL + 1024) * 4 / 3

// decodeCursor reads a cursor of the query whose fingerprint is query;
// "" is the start (ok false).
func (r *Reader) decodeCursor(s, query string) (p position, ok bool, err error) {
	if s == "" {
		return position{}, false, nil
	}
	if len(s) > maxCursor {
		return position{}, false, invalid("cursor", "longer than %d bytes", maxCursor)
	}
	body, sig, found := strings.Cut(s, ".")
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	mac, err2 := base64.RawURLEncoding.DecodeString(sig)
	if !found || err1 != nil || err2 != nil {
		return position{}, false, invalid("cursor", "not a cursor of this API")
	}
	h := hmac.New(sha256.New, r.key())
	h.Write(b)
	if !hmac.Equal(mac, h.Sum(nil)[:16]) {
		return position{}, false, invalid("cursor", "altered, or signed by a reader with another READER_CURSOR_KEY")
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return position{}, false, invalid("cursor", "not a cursor of this API")
	}
	if p.Query != query {
		return position{}, false, invalid("cursor", "belongs to another query: repeat the parameters of the request that gave it")
	}
	return p, true, nil
}

// fingerprint names a query by its parameters (for its cursors).
func fingerprint(kind string, params ...any) string {
	b, _ := json.Marshal(append([]any{kind}, params...))
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// pageSize clamps a requested number of rows to [1, most], def when 0.
func pageSize(n, def, most int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 0 || n > most:
		return 0, invalid("limit", "must be between 1 and %d", most)
	}
	return n, nil
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
