package archive_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// sqlTextHash is the view's text hash over a column `text`, as
// page_versions_from_pages computes it for a row the sink did not hash
// (migrations 0014 and 0020).
const sqlTextHash = `cityHash64(trimBoth(replaceRegexpAll(text,
    '[\\s\\x0B\\x{85}\\p{Z}]{2,}|[\\t\\n\\f\\r\\x0B\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}]', ' ')))`

// docsTextHash is the same hash as docs/search.md writes it (migration
// 0013's expression): one regular expression for every run.
const docsTextHash = `cityHash64(trimBoth(replaceRegexpAll(text, '[\\s\\x0B\\x{85}\\p{Z}]+', ' ')))`

// whitespace is every character of the class the text hash normalises.
var whitespace = []string{
	"\t", "\n", "\v", "\f", "\r", " ", "\u0085", "\u00a0", "\u1680",
	"\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a",
	"\u2028", "\u2029", "\u202f", "\u205f", "\u3000",
}

// hostileTexts are markdowns that a page may carry and that the
// normalisation could get wrong.
func hostileTexts() map[string]string {
	texts := map[string]string{
		"empty":                       "",
		"only spaces":                 "     ",
		"one space":                   " ",
		"plain":                       "Basic plan: 10 EUR",
		"CRLF":                        "line one\r\nline two\r\n\r\n",
		"NUL bytes":                   "a\x00b \x00 \x00\x00c\x00",
		"NUL at the ends":             "\x00 a \x00",
		"all whitespace mixed":        strings.Join(whitespace, ""),
		"all whitespace around words": "x" + strings.Join(whitespace, "y") + "z",
		"whitespace at both ends":     "\u3000\t\u00a0 word \u2029\r\n\u0085",
		"lone spaces at the ends":     " Basic plan costs ten euros a month ",
		// Format characters outside the class: they stay.
		"zero width space":     "a\u200bb \u200b c",
		"byte order mark":      "\ufeffa b\ufeff",
		"mongolian vowel sep":  "a\u180eb \u180e",
		"zero width joiners":   "a\u200c\u200db\u2060c",
		"next to the class":    "a\u1fffb\u200bc\u2027d\u202ae\u2030f\u205eg\u2060h\u2fffi\u3001j\u0084k\u0086l\u009fm",
		"lone continuations":   "a\x80b \x85 \xa0\xa0c\x85\xa0",
		"truncated sequences":  "a\xc2 b\xe2\x80 c\xe3\x80 d\xe1\x9a e\xe2",
		"truncated before ws":  "\xe2\x80\xe2\x80\xa8x\xc2\xc2\xa0y\xe3\xe3\x80\x80z",
		"truncated at the end": "word \xe2\x80",
		"overlong encodings":   "a\xc0\xa0b\xe0\x80\xa0c\xc1\x89d\xe0\x82\x85e\xf0\x80\x80\xa0f",
		"surrogates":           "a\xed\xa0\x80b \xed\xbf\xbf c\xed\xb2\x85",
		"beyond unicode":       "a\xf4\x90\x80\x80b\xf8\x88\x80\x80\x80c\xff\xfe",
		"lead bytes in a run":  " \xc2 \xe2 \xe3 ",
		"mixed valid invalid":  "\xa0\u00a0\xc2\x85\u0085\x85\xe2\x80\xa8\u2028",
	}
	for _, ws := range whitespace {
		texts[fmt.Sprintf("U+%04X alone", []rune(ws)[0])] = ws
		texts[fmt.Sprintf("U+%04X run", []rune(ws)[0])] = "a" + strings.Repeat(ws, 3) + "b"
		texts[fmt.Sprintf("U+%04X between", []rune(ws)[0])] = "a" + ws + "b"
		texts[fmt.Sprintf("U+%04X at both ends", []rune(ws)[0])] = ws + "a b" + ws + ws
	}
	// A page over a megabyte, whitespace of every kind throughout.
	var big strings.Builder
	for i := 0; big.Len() < 1<<20+100; i++ {
		big.WriteString("word")
		big.WriteString(strings.Repeat(whitespace[i%len(whitespace)], 1+i%3))
	}
	texts["over a megabyte"] = big.String()
	return texts
}

// TestTextHashMatchesClickHouse: TextHash gives, for every hostile text,
// the very hash ClickHouse computes with the view's expression, so a version
// hashed by the sink compares with one hashed by ClickHouse before it.
func TestTextHashMatchesClickHouse(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.OpenDatabase(t)
	texts := hostileTexts()
	names := make([]string, 0, len(texts))
	values := make([]string, 0, len(texts))
	for name, text := range texts {
		names = append(names, name)
		values = append(values, text)
	}
	for i, mismatch := range compareWithClickHouse(t, conn, cfg, values) {
		t.Errorf("%s: Go %x, ClickHouse %x (text %q)", names[i], mismatch.got, mismatch.want, truncate(values[i]))
	}
}

// TestTextHashEveryCodePoint: every Unicode code point, alone and between
// two letters, hashes as ClickHouse hashes it: Go and ClickHouse take the
// same characters for whitespace, and no other.
func TestTextHashEveryCodePoint(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.OpenDatabase(t)
	var texts []string
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue // surrogates: TestTextHashMatchesClickHouse has them encoded
		}
		texts = append(texts, string(r), "a"+string(r)+"b")
	}
	for i, mismatch := range compareWithClickHouse(t, conn, cfg, texts) {
		t.Errorf("%q: Go %x, ClickHouse %x", texts[i], mismatch.got, mismatch.want)
	}
}

// TestTextHashRandomTexts: random texts made of whitespace, pieces of
// UTF-8 sequences, invalid bytes and words hash as ClickHouse hashes them.
// The seed changes from run to run and is printed on failure.
func TestTextHashRandomTexts(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.OpenDatabase(t)
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, 26))
	pieces := append([]string{
		"a", "word", "\x00", "\x80", "\x85", "\xa0", "\xa8", "\xc2", "\xe1", "\xe2", "\xe3", "\xe2\x80", "\xe3\x80", "\xe1\x9a",
		"\xed\xa0\x80", "\xc0\xa0", "\xff", "\u200b", "\ufeff", "\u180e", "é", "日本",
		// Plain words of every length, so that whitespace falls at every
		// offset of the eight-byte blocks the normalisation reads.
		"bc", "def", "ghij", "klmno", "pqrstu", "vwxyzAB", "CDEFGHIJ", "KLMNOPQRS", "0123456789abcdefg",
	}, whitespace...)
	texts := make([]string, 20000)
	for i := range texts {
		var b strings.Builder
		for range rnd.IntN(40 + i%4*40) {
			b.WriteString(pieces[rnd.IntN(len(pieces))])
		}
		texts[i] = b.String()
	}
	for i, mismatch := range compareWithClickHouse(t, conn, cfg, texts) {
		t.Errorf("seed %d: %q: Go %x, ClickHouse %x", seed, texts[i], mismatch.got, mismatch.want)
	}
}

// TestTextHasherAllocatesNothing: a TextHasher hashing page after page
// reuses its buffer. Not parallel: AllocsPerRun counts every goroutine's.
func TestTextHasherAllocatesNothing(t *testing.T) {
	text := strings.Repeat("Basic  plan:\u00a010 EUR\r\n", 1000)
	var h archive.TextHasher
	h.Sum(text)
	if n := testing.AllocsPerRun(100, func() { h.Sum(text) }); n != 0 {
		t.Errorf("%v allocations a page, want 0", n)
	}
}

type hashMismatch struct{ got, want uint64 }

// compareWithClickHouse stores texts, each with its TextHash, in a table
// of the test's database, and returns, by index, the texts whose hash
// differs from the one ClickHouse computes over the stored bytes, with the
// view's expression or the one the docs show.
func compareWithClickHouse(t *testing.T, conn driver.Conn, cfg archive.Config, texts []string) map[int]hashMismatch {
	t.Helper()
	ctx := context.Background()
	table := cfg.Database + ".texts"
	if err := conn.Exec(ctx, "CREATE TABLE "+table+" (i UInt32, text String, go_hash UInt64) ENGINE = MergeTree ORDER BY i"); err != nil {
		t.Fatal(err)
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" (i, text, go_hash)")
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		if err := batch.Append(uint32(i), text, textHash(text)); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	var stored uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+table).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != uint64(len(texts)) {
		t.Fatalf("%d texts stored, want %d", stored, len(texts))
	}
	rows, err := conn.Query(ctx, "SELECT i, go_hash, "+sqlTextHash+" AS sql_hash FROM "+table+
		" WHERE go_hash != sql_hash OR go_hash != "+docsTextHash+" ORDER BY i LIMIT 50")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]hashMismatch{}
	for rows.Next() {
		var i uint32
		var m hashMismatch
		if err := rows.Scan(&i, &m.got, &m.want); err != nil {
			t.Fatal(err)
		}
		out[int(i)] = m
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// TestPageVersionsTextHash: the versions the sink archives, delivered or
// backfilled, get in page_versions the text hash the view computed before
// the sink did (the classes are what they were), from the sink's hash in
// pages.text_hash; a row an older sink inserted, without text_hash, gets
// the same hash from the view's fallback; a 404 page gets 0.
func TestPageVersionsTextHash(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()
	const crawlID = "33333333-3333-4333-8333-333333333333"
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

	type row struct {
		url, markdown string
		status        int
		sink          bool // archived by this sink, else by one before text_hash
	}
	var rows []row
	for i, text := range []string{
		"\u00a0# Prices\r\n\t\nBasic\u3000plan:  10 EUR\n", "", "   ", "a\u200bb \ufeff c\u180e",
		strings.Join(whitespace, "x"), "NUL\x00 \x00", hostileTexts()["over a megabyte"],
	} {
		rows = append(rows, row{fmt.Sprintf("https://site.test/delivered/%d", i), text, 200, true})
	}
	rows = append(rows,
		row{"https://site.test/gone", "Not  found", 404, true},
		row{"https://site.test/backfilled", "\tA new\u2028page ", 200, true},
		// An older sink's rows: any bytes (it is no JSON decoder that made them).
		row{"https://site.test/older-sink", "\u2003Basic  plan\xe2\x80 \xc2\xa0\xff\t", 200, false},
		row{"https://site.test/older-sink-empty", "", 200, false},
	)

	for _, r := range rows {
		switch {
		case strings.Contains(r.url, "backfilled"):
			doc := archivetest.MustDecode(t, archivetest.PageBody(t, crawlID, r.url, r.markdown, r.status)).Data[0]
			if _, err := w.InsertBackfill(ctx, crawlID, events.KindCrawl, []events.Document{doc}); err != nil {
				t.Fatal(err)
			}
		case r.sink:
			archivetest.InsertDelivery(t, w, archivetest.PageBody(t, crawlID, r.url, r.markdown, r.status), at)
		default:
			// The INSERT of a sink before migration 0020.
			batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+cfg.Database+".pages (crawl_id, job_kind, url, scrape_id, webhook_id, origin, success, status_code, title, content, markdown_bytes, error, document_cut, webhook_metadata, received_at)")
			if err != nil {
				t.Fatal(err)
			}
			if err := batch.Append(uuid.MustParse(crawlID), "crawl", r.url, "", uuid.New(), archive.OriginWebhook, true, uint16(r.status),
				"", r.markdown, uint32(len(r.markdown)), "", "{}", "{}", at); err != nil {
				t.Fatal(err)
			}
			if err := batch.Send(); err != nil {
				t.Fatal(err)
			}
		}
	}

	type hashes struct{ version, page, sql uint64 }
	got := map[string]hashes{}
	q := "SELECT v.url, v.text_hash, p.text_hash, p.sql_hash FROM " + cfg.Database + ".page_versions AS v FINAL " +
		"INNER JOIN (SELECT url, text_hash, " + strings.ReplaceAll(sqlTextHash, "(text,", "(markdown,") + " AS sql_hash FROM " + cfg.Database + ".pages FINAL) AS p ON v.url = p.url"
	res, err := conn.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	for res.Next() {
		var url string
		var h hashes
		if err := res.Scan(&url, &h.version, &h.page, &h.sql); err != nil {
			t.Fatal(err)
		}
		got[url] = h
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Errorf("%d versions, want %d: %v", len(got), len(rows), got)
	}
	for _, r := range rows {
		h, ok := got[r.url]
		switch {
		case !ok:
			t.Errorf("%s: no version", r.url)
		case r.status == 404 && h.version != 0:
			t.Errorf("%s: a 404 version has text hash %x, want 0", r.url, h.version)
		case r.status != 404 && h.version != h.sql:
			t.Errorf("%s: version's text hash %x, the view's expression gives %x", r.url, h.version, h.sql)
		case r.sink && h.page != textHash(r.markdown):
			t.Errorf("%s: pages.text_hash %x, want the sink's %x", r.url, h.page, textHash(r.markdown))
		case !r.sink && h.page != 0:
			t.Errorf("%s: an older sink's row has pages.text_hash %x, want 0 (not computed)", r.url, h.page)
		}
	}
}

// BenchmarkTextHash: what change tracking's text hash costs the sink a
// page: word-like text as BenchmarkSinkChangeTracking archives, markdown with
// line breaks and runs of whitespace, and Japanese (non-ASCII throughout).
func BenchmarkTextHash(b *testing.B) {
	var words strings.Builder
	for i := 0; words.Len() < 3000; i++ {
		words.WriteString([]string{"crawl", "page", "archive", "search", "the", "of", "and", "data"}[i*5%8])
		words.WriteByte(' ')
	}
	for _, tc := range []struct{ name, page string }{
		{"words 3 kB", words.String()[:3000]},
		{"markdown 27 kB", strings.Repeat("## Pricing\n\nThe  Basic plan costs 10\u00a0EUR a month, billed yearly.\r\n", 400)},
		{"japanese 25 kB", strings.Repeat("日本語のテキスト、価格は月額十ユーロです。\n", 400)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var h archive.TextHasher
			b.SetBytes(int64(len(tc.page)))
			b.ReportAllocs()
			for b.Loop() {
				h.Sum(tc.page)
			}
		})
	}
}

// textHash is the text hash of markdown, as the Writer computes it.
func textHash(markdown string) uint64 {
	var h archive.TextHasher
	return h.Sum(markdown)
}
