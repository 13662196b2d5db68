package archive

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"
)

// Orders of a search.
const (
	// OrderNewest: the newest versions first (received_at, then job and
	// URL, descending).
	OrderNewest = "newest"
	// OrderRelevance: by Score (how much of the query the title holds),
	// then as OrderNewest.
	OrderRelevance = "relevance"
)

// Change classes of page_changes (docs/search.md).
var changeClasses = []string{"new", "changed", "same", "removed"}

// SearchQuery is one search of the archive's pages: every version of every
// page (one row per job and URL, as `pages FINAL`) that holds all the
// words and phrases of Text and passes every filter set.
type SearchQuery struct {
	// Text holds words and "quoted phrases". A word matches a whole token
	// of the title or the markdown, in any case (the text index's tokens:
	// runs of letters and digits); every word must be there. A phrase
	// matches its words in the markdown next to each other, in order, in
	// any case, with only spaces, line breaks or punctuation between them.
	// Empty: every page passing the filters.
	Text string
	// Job is a job id (crawl or batch scrape); Kind "crawl" or
	// "batch_scrape"; Host the URL's host, exactly.
	Job, Kind, Host string
	// From (inclusive) and To (exclusive) bound received_at; zero: open.
	From, To time.Time
	// StatusMin and StatusMax bound the status code, inclusive; 0: open.
	StatusMin, StatusMax uint16
	// Change keeps the versions of that change class: new, changed, same
	// or removed.
	Change string
	// Order is OrderNewest (the default) or OrderRelevance.
	Order string
	// Limit is the page's size: 1 to 100, 0 for 20.
	Limit int
	// Cursor continues a search from the Next of its previous page; the
	// other fields must be the same.
	Cursor string
}

// SearchHit is one version of a page that matched.
type SearchHit struct {
	CrawlID    uuid.UUID
	JobKind    string
	URL        string
	Host       string
	Title      string
	StatusCode uint16
	Success    bool
	ReceivedAt time.Time
	// Snippet is up to 240 characters of the markdown around the first
	// phrase or word of the query (its start without one). Crawled text:
	// hostile, to be escaped where shown.
	Snippet string
	// Score is the relevance, from the title: 10 for each phrase it holds
	// (as a phrase matches), plus 1 for each word it holds (any case, as a
	// substring). Set with OrderRelevance.
	Score uint64
	// Change is the version's change class ("" for a version that is not
	// one: a failed page other than 404/410).
	Change string
}

// SearchPage is a page of hits; Next continues it ("" at the end).
type SearchPage struct {
	Hits []SearchHit
	Next string
}

// Bounds of a search query's text.
const (
	maxQueryText  = 1000
	maxQueryTerms = 16
	snippetBefore = 80
	snippetLength = 240
)

// parsedText is a query's text split: lower-cased words (as the text index
// splits them) and phrases, each a list of such words.
type parsedText struct {
	words   []string
	phrases [][]string
}

// splitWords splits s as the text index does: runs of letters and digits,
// lower-cased.
func splitWords(s string) []string {
	words := strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for i, w := range words {
		words[i] = strings.ToLower(w)
	}
	return words
}

// parseText splits text into words and "phrases". A phrase's words are
// also words, so the index narrows the pages before the phrase is checked.
func parseText(text string) (parsedText, error) {
	var p parsedText
	if len(text) > maxQueryText {
		return p, invalid("q", "longer than %d bytes", maxQueryText)
	}
	if strings.Count(text, `"`)%2 == 1 {
		return p, invalid("q", "a phrase's closing quote is missing")
	}
	seen := map[string]bool{}
	for i, part := range strings.Split(text, `"`) {
		words := splitWords(part)
		if i%2 == 1 && len(words) > 1 {
			p.phrases = append(p.phrases, words)
		}
		for _, w := range words {
			if !seen[w] {
				seen[w] = true
				p.words = append(p.words, w)
			}
		}
	}
	if len(p.words)+len(p.phrases) > maxQueryTerms {
		return p, invalid("q", "more than %d words and phrases", maxQueryTerms)
	}
	if len(p.words) == 0 && strings.TrimSpace(text) != "" {
		return p, invalid("q", "holds no word (letters or digits)")
	}
	return p, nil
}

// phraseRegexp matches a phrase's words next to each other, in order, in
// any case, with anything but letters and digits between them (spaces,
// line breaks, punctuation), as whole words. The words are letters and
// digits only: nothing in them is a regular expression's syntax.
func phraseRegexp(words []string) string {
	const gap = `[^\p{L}\p{N}]`
	return `(?i)(?:^|` + gap + `)` + strings.Join(words, gap+`+`) + `(?:$|` + gap + `)`
}

// where is a query's WHERE being built: its conditions and their named
// parameters, values never in the text.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

func (w *where) String() string {
	if len(w.conds) == 0 {
		return "1"
	}
	return strings.Join(w.conds, " AND ")
}

func (q SearchQuery) validate() (job uuid.UUID, err error) {
	if q.Job != "" {
		if job, err = uuid.Parse(q.Job); err != nil {
			return job, invalid("job", "not a job id (a UUID)")
		}
	}
	if q.Kind != "" && q.Kind != "crawl" && q.Kind != "batch_scrape" {
		return job, invalid("kind", "must be crawl or batch_scrape")
	}
	if len(q.Host) > 255 {
		return job, invalid("host", "longer than 255 bytes")
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return job, invalid("from", "must be before to")
	}
	if q.StatusMax != 0 && q.StatusMin > q.StatusMax {
		return job, invalid("status", "the lowest code is above the highest")
	}
	if q.Change != "" && !oneOf(q.Change, changeClasses) {
		return job, invalid("change", "must be one of %s", strings.Join(changeClasses, ", "))
	}
	if q.Order != "" && q.Order != OrderNewest && q.Order != OrderRelevance {
		return job, invalid("order", "must be newest or relevance")
	}
	return job, nil
}

func oneOf(s string, set []string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}

// Search runs q. The words are found by the text index (docs/search.md),
// in the pages of q's filters; with phrases, in two steps as documented
// there: the keys of the pages holding every word, from the index alone,
// then the text of only those pages. Pages are stable while rows are
// inserted: the cursor is the sort key of the last hit, and each page
// starts after it (a version received later than the first page, or with
// a higher score, is not shown in later pages of that search).
func (r *Reader) Search(ctx context.Context, q SearchQuery) (SearchPage, error) {
	job, err := q.validate()
	if err != nil {
		return SearchPage{}, err
	}
	text, err := parseText(q.Text)
	if err != nil {
		return SearchPage{}, err
	}
	limit, err := pageSize(q.Limit, 20, 100)
	if err != nil {
		return SearchPage{}, err
	}
	order := q.Order
	if order == "" {
		order = OrderNewest
	}
	fp := fingerprint("search", q.Text, q.Job, q.Kind, q.Host, q.From, q.To, q.StatusMin, q.StatusMax, q.Change, order)
	after, cont, err := r.decodeCursor(q.Cursor, fp)
	if err != nil {
		return SearchPage{}, err
	}

	var w where
	// The filters that narrow by key or index, shared by the phrase's
	// inner query.
	var narrow where
	if q.Job != "" {
		narrow.add("crawl_id = {job:UUID}")
		w.args = append(w.args, clickhouse.Named("job", job.String()))
	}
	if q.Host != "" {
		narrow.add("host = {host:String}")
		w.args = append(w.args, clickhouse.Named("host", q.Host))
	}
	if len(text.words) > 0 {
		narrow.add("(hasAllTokens(markdown, {words:Array(String)}) OR hasAllTokens(title, {words:Array(String)}))")
		w.args = append(w.args, clickhouse.Named("words", text.words))
	}
	w.conds = append(w.conds, narrow.conds...)
	// Each phrase is a regular expression of its own (match needs a
	// constant one), as a named parameter.
	var phraseParams []string
	for i, ph := range text.phrases {
		name := "phrase" + strconv.Itoa(i)
		phraseParams = append(phraseParams, "{"+name+":String}")
		w.args = append(w.args, clickhouse.Named(name, phraseRegexp(ph)))
	}
	if len(text.phrases) > 0 {
		w.add("(crawl_id, url) GLOBAL IN (SELECT crawl_id, url FROM " + r.db + ".pages WHERE " + narrow.String() + ")")
		for _, p := range phraseParams {
			w.add("match(markdown, " + p + ")")
		}
	}
	if q.Kind != "" {
		w.add("job_kind = {kind:String}", clickhouse.Named("kind", q.Kind))
	}
	if !q.From.IsZero() {
		w.add("received_at >= fromUnixTimestamp64Milli({from:Int64}, 'UTC')", clickhouse.Named("from", millis(q.From)))
	}
	if !q.To.IsZero() {
		w.add("received_at < fromUnixTimestamp64Milli({to:Int64}, 'UTC')", clickhouse.Named("to", millis(q.To)))
	}
	if q.StatusMin != 0 {
		w.add("status_code >= {status_min:UInt16}", clickhouse.Named("status_min", q.StatusMin))
	}
	if q.StatusMax != 0 {
		w.add("status_code <= {status_max:UInt16}", clickhouse.Named("status_max", q.StatusMax))
	}
	if q.Change != "" {
		cw := "change = {change:String}"
		if q.Job != "" {
			cw += " AND crawl_id = {job:UUID}"
		}
		w.add("(crawl_id, url) GLOBAL IN (SELECT crawl_id, url FROM "+r.db+".page_changes WHERE "+cw+")", clickhouse.Named("change", q.Change))
	}

	// Relevance reads the titles only: scoring the text of every match
	// would read the whole content of every matching page (seconds on a
	// large archive), where the title is a few bytes.
	score := "toUInt64(0)"
	if order == OrderRelevance && len(text.words) > 0 {
		terms := []string{}
		for i, word := range text.words {
			name := "tw" + strconv.Itoa(i)
			terms = append(terms, "(positionCaseInsensitiveUTF8(title, {"+name+":String}) > 0)")
			w.args = append(w.args, clickhouse.Named(name, word))
		}
		for _, p := range phraseParams {
			terms = append(terms, "10 * match(title, "+p+")")
		}
		score = "toUInt64(" + strings.Join(terms, " + ") + ")"
	}
	key := "received_at, crawl_id, url"
	if cont {
		if order == OrderRelevance {
			w.add("("+score+", "+key+") < ({s:UInt64}, fromUnixTimestamp64Milli({t:Int64}, 'UTC'), {c:UUID}, {u:String})",
				clickhouse.Named("s", after.Score), clickhouse.Named("t", after.Time), clickhouse.Named("c", after.CrawlID), clickhouse.Named("u", after.URL))
		} else {
			w.add("("+key+") < (fromUnixTimestamp64Milli({t:Int64}, 'UTC'), {c:UUID}, {u:String})",
				clickhouse.Named("t", after.Time), clickhouse.Named("c", after.CrawlID), clickhouse.Named("u", after.URL))
		}
	}
	orderBy := "received_at DESC, crawl_id DESC, url DESC"
	if order == OrderRelevance {
		orderBy = "score DESC, " + orderBy
	}
	needle := ""
	switch {
	case len(text.phrases) > 0:
		needle = text.phrases[0][0]
	case len(text.words) > 0:
		needle = text.words[0]
	}
	w.args = append(w.args, clickhouse.Named("needle", needle), clickhouse.Named("limit", uint64(limit+1)))
	snippet := "substringUTF8(markdown, toUInt64(greatest(1, toInt64(positionCaseInsensitiveUTF8(markdown, {needle:String})) - " +
		strconv.Itoa(snippetBefore) + ")), " + strconv.Itoa(snippetLength) + ")"
	if needle == "" {
		snippet = "substringUTF8(markdown, 1, " + strconv.Itoa(snippetLength) + ")"
	}

	// Two steps: the page's keys first, from the key, the indexes and the
	// small columns; then the snippet of only those rows. In one query
	// ClickHouse may read the text of every match before it sorts and
	// cuts: the whole content of every page holding a common word.
	rows, err := r.conn.Query(r.limited(ctx),
		"SELECT crawl_id, toString(job_kind), url, toString(host), title, status_code, success, received_at, "+score+" AS score, "+snippet+" AS snippet"+
			" FROM "+r.db+".pages FINAL WHERE (crawl_id, url) GLOBAL IN (SELECT crawl_id, url FROM (SELECT crawl_id, url, received_at, "+score+" AS score FROM "+
			r.db+".pages FINAL WHERE "+w.String()+" ORDER BY "+orderBy+" LIMIT {limit:UInt64})) ORDER BY "+orderBy, w.args...)
	if err != nil {
		return SearchPage{}, readErr("search", err)
	}
	defer rows.Close()
	var page SearchPage
	for rows.Next() {
		var h SearchHit
		if err := rows.Scan(&h.CrawlID, &h.JobKind, &h.URL, &h.Host, &h.Title, &h.StatusCode, &h.Success, &h.ReceivedAt, &h.Score, &h.Snippet); err != nil {
			return SearchPage{}, readErr("search", err)
		}
		page.Hits = append(page.Hits, h)
	}
	if err := rows.Err(); err != nil {
		return SearchPage{}, readErr("search", err)
	}
	if len(page.Hits) > limit {
		page.Hits = page.Hits[:limit]
		last := page.Hits[limit-1]
		page.Next = r.encodeCursor(position{Query: fp, Time: millis(last.ReceivedAt), Score: last.Score, CrawlID: last.CrawlID.String(), URL: last.URL})
	}
	if err := r.classify(ctx, page.Hits); err != nil {
		return SearchPage{}, err
	}
	return page, nil
}

// classify sets the change class of hits: one query on page_changes by
// URL, which reaches its table's key.
func (r *Reader) classify(ctx context.Context, hits []SearchHit) error {
	if len(hits) == 0 {
		return nil
	}
	urls := make([]string, 0, len(hits))
	for _, h := range hits {
		urls = append(urls, h.URL)
	}
	rows, err := r.conn.Query(r.limited(ctx), "SELECT crawl_id, url, change FROM "+r.db+".page_changes WHERE url IN {urls:Array(String)}",
		clickhouse.Named("urls", urls))
	if err != nil {
		return readErr("change classes of the hits", err)
	}
	defer rows.Close()
	type key struct {
		crawl uuid.UUID
		url   string
	}
	classes := map[key]string{}
	for rows.Next() {
		var k key
		var c string
		if err := rows.Scan(&k.crawl, &k.url, &c); err != nil {
			return readErr("change classes of the hits", err)
		}
		classes[k] = c
	}
	if err := rows.Err(); err != nil {
		return readErr("change classes of the hits", err)
	}
	for i := range hits {
		hits[i].Change = classes[key{hits[i].CrawlID, hits[i].URL}]
	}
	return nil
}
