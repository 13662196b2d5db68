package query

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/events"
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
var changeClasses = events.ChangeClasses()

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
	// Count asks the first page (no Cursor) to count the matches
	// (SearchPage.Count): one more query.
	Count bool
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
	// Snippet is up to 240 characters of the markdown centred on where
	// the query's first phrase matches (or, without a phrase, its first
	// word found as a whole word; the start when none is). Crawled text:
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
	// Next continues the search after this page; "" at the end.
	Next string
	// Partial is set when the request's budget (SearchBudget) ran out
	// before the page was full: Hits are those found in the part of the
	// archive read, fewer than asked for and maybe none, and Next goes on
	// from where the reading stopped (it is always set then).
	Partial bool
	// Count is how many versions match, on a search's first page (no
	// cursor) when SearchQuery.Count asked: exactly when CountExact, else the versions holding every
	// word that pass the filters the index answers, which a phrase or a
	// change class checked page by page narrows further (an upper
	// bound). At most MaxSearchCount: a Count of more says "more than".
	Count      uint64
	CountExact bool
}

// Relations of a search's count to its matches (SearchPage.Counted), as
// the read API and the pages say them.
const (
	// CountExactly: the matches are the count.
	CountExactly = "eq"
	// CountAtMost: the count is an upper bound (a phrase or a change class
	// is checked page by page).
	CountAtMost = "lte"
	// CountMoreThan: more than the count, MaxSearchCount.
	CountMoreThan = "gt"
)

// Counted is the count of a first page and how it bounds the matches.
func (p SearchPage) Counted() (n uint64, relation string) {
	switch {
	case p.Count > MaxSearchCount:
		return MaxSearchCount, CountMoreThan
	case p.CountExact:
		return p.Count, CountExactly
	}
	return p.Count, CountAtMost
}

// MaxSearchCount is the most matches a search counts: past it, Count is
// MaxSearchCount+1 ("more than"), which keeps the count a read of at most
// that many keys.
const MaxSearchCount = 10000

// SearchBudget bounds the work of one search request, whatever the number
// of its queries (each of which runs under the Limits): the candidates it
// checks (reading their text for a phrase, their versions for a change
// class) and the time it starts new batches in. Past either, the request
// answers the hits found so far as a Partial page whose cursor goes on
// from the last candidate checked: a search that matches nothing reads a
// budget's worth of the archive per request, never all of it.
type SearchBudget struct {
	// Candidates is the most candidates one request checks (0:
	// DefaultSearchBudget's).
	Candidates int
	// Time is how long after its start a request still starts a batch (0:
	// DefaultSearchBudget's). The batch started last runs to its end,
	// itself bounded by Limits.MaxExecutionTime.
	Time time.Duration
}

// DefaultSearchBudget is the budget of a Reader that was given none.
var DefaultSearchBudget = SearchBudget{Candidates: 65536, Time: 5 * time.Second}

// Bounds of a search query's text.
const (
	maxQueryText  = 1000
	maxQueryTerms = 16
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
		if i%2 == 0 {
			if err := unsupported(part); err != nil {
				return p, err
			}
		}
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

// unsupported refuses the syntax of other search engines in part of a
// query outside quotes, which the search would otherwise take as words
// (OR, a word) or drop silently (the sign of -word, the star of word*):
// an answer to another question than the one asked.
func unsupported(part string) error {
	for _, f := range strings.Fields(part) {
		switch {
		case f == "OR":
			return invalid("q", "OR is not supported: a search finds the pages holding every word; search once for each alternative")
		case len(f) > 1 && f[0] == '-' && isWordStart(f[1:]):
			return invalid("q", "-word (leaving a word out) is not supported: a search finds the pages holding every word, the sign would be ignored")
		case strings.HasSuffix(f, "*") && strings.TrimRight(f, "*") != "":
			return invalid("q", "word* (a word's beginning) is not supported: words match whole words only")
		}
	}
	return nil
}

// isWordStart reports whether s starts with a letter or digit.
func isWordStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r) || unicode.IsDigit(r)
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
	if q.Kind != "" && q.Kind != events.KindCrawl && q.Kind != events.KindBatchScrape {
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
	s, err := r.plan(q)
	if err != nil {
		return SearchPage{}, err
	}
	page, err := s.run(ctx)
	if err != nil || !q.Count || q.Cursor != "" {
		return page, err
	}
	page.Count, page.CountExact, err = s.count(ctx)
	return page, err
}

// count counts the versions (job and URL) the search's index filters keep,
// up to MaxSearchCount+1: exact when no candidate is checked further (no
// phrase, no change class checked batch by batch). A version delivered
// again with other text counts once, as the text it held at any delivery.
func (s search) count(ctx context.Context) (n uint64, exact bool, err error) {
	err = s.r.conn.QueryRow(ctx, "SELECT count() FROM (SELECT DISTINCT crawl_id, url FROM "+s.r.db+".pages WHERE "+s.where.String()+
		" LIMIT {count_max:UInt64})", append(slices.Clip(s.where.args), clickhouse.Named("count_max", uint64(MaxSearchCount+1)))...).Scan(&n)
	if err != nil {
		return 0, false, readErr("search count", err)
	}
	return n, len(s.phrases) == 0 && s.change == "", nil
}

// search is a Search's plan: the filters that the key, the text index and
// the small columns answer (where), and the checks that read more of each
// candidate (a phrase reads its text; a change class its URL's versions).
type search struct {
	r     *Reader
	where where
	text  parsedText
	// page is the search's keyset: its sort key (the score first with
	// OrderRelevance), its cursor and its size; after is where its cursor
	// starts (nil: the first page).
	page      keyset
	after     *position
	score     string
	orderBy   string
	relevance bool
	// phrases are the parameters of text's phrases, each a regular
	// expression (phraseRegexp).
	phrases []string
	// change is the class checked candidate by candidate ("" when the
	// where keeps only that class, or none was asked for); class is the
	// one asked for.
	change, class string
}

// plan checks q and writes its search: its filters, its order and its
// page.
func (r *Reader) plan(q SearchQuery) (search, error) {
	job, err := q.validate()
	if err != nil {
		return search{}, err
	}
	text, err := parseText(q.Text)
	if err != nil {
		return search{}, err
	}
	limit, err := pageSize(q.Limit, 20, 100)
	if err != nil {
		return search{}, err
	}
	order := q.Order
	if order == "" {
		order = OrderNewest
	}
	w, phrases := filters(q, job, text)
	s := search{r: r, where: w, text: text, phrases: phrases, relevance: order == OrderRelevance, change: q.Change, class: q.Change}
	s.score = s.scoreExpr()
	s.orderBy = "received_at DESC, crawl_id DESC, url DESC"
	s.page = keyset{query: fingerprint("search", q.Text, q.Job, q.Kind, q.Host, q.From, q.To, q.StatusMin, q.StatusMax, q.Change, order),
		cursor: q.Cursor, limit: limit, what: "search",
		key: "(received_at, crawl_id, url)", after: "(fromUnixTimestamp64Milli({t:Int64}, 'UTC'), {c:UUID}, {u:String})",
		index: "received_at <= fromUnixTimestamp64Milli({t:Int64}, 'UTC')"}
	if s.relevance {
		s.orderBy = "score DESC, " + s.orderBy
		s.page.key = "(" + s.score + ", received_at, crawl_id, url)"
		s.page.after = "({s:UInt64}, fromUnixTimestamp64Milli({t:Int64}, 'UTC'), {c:UUID}, {u:String})"
		s.page.index = ""
	}
	if s.after, err = s.page.start(r); err != nil {
		return search{}, err
	}
	if q.Change != "" && q.Job != "" {
		// In one job the versions of its URLs are read (page_changes
		// reaches page_versions by URL): as much as the job, whatever the
		// archive's size, and no class checked batch by batch.
		s.where.add("(crawl_id, url) GLOBAL IN (SELECT crawl_id, url FROM "+r.db+".page_changes WHERE change = {change:String} AND crawl_id = {job:UUID}"+
			" AND url GLOBAL IN (SELECT url FROM "+r.db+".pages WHERE crawl_id = {job:UUID}))", clickhouse.Named("change", q.Change))
		s.change = ""
	}
	return s, nil
}

// filters is the WHERE of q's filters that the key, the indexes and the
// small columns answer, with the parameters of text's phrases, whose
// names it returns: each phrase is a regular expression of its own (match
// needs a constant one).
func filters(q SearchQuery, job uuid.UUID, text parsedText) (w where, phrases []string) {
	if q.Job != "" {
		w.add("crawl_id = {job:UUID}", clickhouse.Named("job", job.String()))
	}
	if q.Host != "" {
		w.add("host = {host:String}", clickhouse.Named("host", q.Host))
	}
	if len(text.words) > 0 {
		w.add("(hasAllTokens(markdown, {words:Array(String)}) OR hasAllTokens(title, {words:Array(String)}))", clickhouse.Named("words", text.words))
	}
	for i, ph := range text.phrases {
		name := "phrase" + strconv.Itoa(i)
		phrases = append(phrases, "{"+name+":String}")
		w.args = append(w.args, clickhouse.Named(name, phraseRegexp(ph)))
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
	return w, phrases
}

// scoreExpr is the expression of a hit's Score, its parameters added to
// s.where: 0 but with OrderRelevance and words. Relevance reads the titles
// only: scoring the text of every match would read the whole content of
// every matching page (seconds on a large archive), where the title is a
// few bytes.
func (s *search) scoreExpr() string {
	if !s.relevance || len(s.text.words) == 0 {
		return "toUInt64(0)"
	}
	terms := []string{}
	for i, word := range s.text.words {
		name := "tw" + strconv.Itoa(i)
		terms = append(terms, "(positionCaseInsensitiveUTF8(title, {"+name+":String}) > 0)")
		s.where.args = append(s.where.args, clickhouse.Named(name, word))
	}
	for _, p := range s.phrases {
		terms = append(terms, "10 * match(title, "+p+")")
	}
	return "toUInt64(" + strings.Join(terms, " + ") + ")"
}

// run reads the page of s: the keys of its hits, then their rows with a
// snippet each while their change classes are read beside them, and the
// cursor of the next page.
func (s search) run(ctx context.Context) (SearchPage, error) {
	keys, stopped, err := s.keys(ctx, s.page.limit+1)
	if err != nil {
		return SearchPage{}, err
	}
	classes := s.classify(ctx, keys)
	hits, err := s.hits(ctx, keys)
	if err != nil {
		return SearchPage{}, err
	}
	page := s.cursor(hits, stopped)
	classOf, err := classes()
	if err != nil {
		return SearchPage{}, err
	}
	for i, h := range page.Hits {
		page.Hits[i].Change = classOf(changeKey{h.CrawlID, h.URL})
	}
	return page, nil
}

// classify starts reading the change classes of keys' versions, beside
// the page's other query, and returns the wait for them: the class of a
// version. Under a change filter every hit is of the class asked for (the
// check or the job's filter kept only those) and nothing is read.
func (s search) classify(ctx context.Context, keys []hitKey) (wait func() (func(changeKey) string, error)) {
	if s.class != "" {
		return func() (func(changeKey) string, error) {
			return func(changeKey) string { return s.class }, nil
		}
	}
	type classified struct {
		classes map[changeKey]string
		err     error
	}
	// Buffered: a page that fails first returns without waiting.
	done := make(chan classified, 1)
	go func() {
		urls := make([]string, 0, len(keys))
		for _, k := range keys {
			urls = append(urls, k.url)
		}
		c, err := s.r.changeClasses(ctx, urls)
		done <- classified{c, err}
	}()
	return func() (func(changeKey) string, error) {
		c := <-done
		if c.err != nil {
			return nil, c.err
		}
		return func(k changeKey) string { return c.classes[k] }, nil
	}
}

// hits reads the rows of keys in the page's order, each with its snippet:
// the text of only those rows.
func (s search) hits(ctx context.Context, keys []hitKey) (*pager[SearchHit], error) {
	expr, needle := snippet(s.text)
	p := &pager[SearchHit]{k: s.page}
	err := s.byKeys(ctx, "SELECT crawl_id, toString(job_kind), url, toString(host), title, status_code, success, received_at, "+s.score+" AS score, "+expr+" AS snippet",
		" ORDER BY "+s.orderBy, keys, append(slices.Clip(s.where.args), clickhouse.Named("needle", needle)), func(rows driver.Rows) error {
			var h SearchHit
			if err := rows.Scan(&h.CrawlID, &h.JobKind, &h.URL, &h.Host, &h.Title, &h.StatusCode, &h.Success, &h.ReceivedAt, &h.Score, &h.Snippet); err != nil {
				return err
			}
			p.add(h, position{Time: millis(h.ReceivedAt), Score: h.Score, CrawlID: h.CrawlID.String(), URL: h.URL})
			return nil
		})
	if err != nil {
		return nil, readErr("search", err)
	}
	return p, nil
}

// snippet is the expression of a hit's Snippet and the regular expression
// ({needle}) of what it is centred on: the first phrase where it matches,
// else the first whole word of the query found in the markdown (a word
// may match only the title). The snippet starts at the markdown's start
// when nothing matches there, or for a search without words.
func snippet(text parsedText) (expr, needle string) {
	switch {
	case len(text.phrases) > 0:
		needle = phraseRegexp(text.phrases[0])
	case len(text.words) > 0:
		needle = phraseRegexp([]string{"(?:" + strings.Join(text.words, "|") + ")"})
	default:
		return "substringUTF8(markdown, 1, " + strconv.Itoa(snippetLength) + ")", ""
	}
	// The match's first character, the snippet as much before it as
	// after its end. extract is "" without a match; its position then 1.
	match := "extract(markdown, {needle:String})"
	around := "greatest(0, intDiv(" + strconv.Itoa(snippetLength) + " - toInt64(lengthUTF8(" + match + ")), 2))"
	return "substringUTF8(markdown, toUInt64(greatest(1, toInt64(positionUTF8(markdown, " + match + ")) - " + around + ")), " +
		strconv.Itoa(snippetLength) + ")", needle
}

// cursor is the page of hits and where the next page starts: after its
// last hit when there are more, or, when the budget ran out (stopped),
// after the last candidate checked (no hit lies between the last hit and
// it). The page is partial then unless it holds as many hits as asked
// for.
func (s search) cursor(hits *pager[SearchHit], stopped *position) SearchPage {
	var page SearchPage
	page.Hits, page.Next = hits.page(s.r)
	if page.Next == "" && stopped != nil {
		stopped.Query = s.page.query
		page.Next = s.r.encodeCursor(*stopped)
		page.Partial = len(page.Hits) < s.page.limit
	}
	return page
}

// hitKey is a version's key and sort key.
type hitKey struct {
	crawl      uuid.UUID
	url        string
	receivedAt time.Time
	score      uint64
}

// Candidates are read in batches growing from firstBatch to maxBatch.
const (
	firstBatch = 256
	maxBatch   = 16384
)

// keys returns the keys of the first n hits in sort order. When the
// request's budget (SearchBudget) runs out first, it returns the hits
// found and the position of the last candidate checked (stopped), from
// which a next request goes on.
//
// Candidates are read from pages without FINAL, in sort order, a batch at
// a time, and each batch is checked: a candidate is a hit when it is its
// key's latest version (the row FINAL would keep), holds every phrase and
// is of the change class asked for. Under FINAL, ClickHouse reads the key
// columns of every row that passes the filters, in every part, to find
// the latest version of each key before it sorts (0.7 s for a word every
// page holds, at a million pages); without it, newest first, the minmax
// index on received_at lets it read the granules of the newest matches
// only. The check reads only the batch's keys, and their text only when
// there is a phrase.
func (s search) keys(ctx context.Context, n int) (out []hitKey, stopped *position, err error) {
	// Without a phrase or a change class, nearly every candidate is a hit
	// (only a version delivered again later is not): a batch of n.
	batch := n
	if len(s.phrases) > 0 || s.change != "" {
		batch = max(n, firstBatch)
	}
	after := s.after
	seen := map[changeKey]bool{}
	budget := s.r.searchBudget()
	deadline := time.Now().Add(budget.Time)
	checked := 0
	for {
		if checked > 0 && (checked >= budget.Candidates || !time.Now().Before(deadline)) {
			return out, after, nil
		}
		batch = min(batch, budget.Candidates-checked)
		w := where{conds: slices.Clip(s.where.conds), args: slices.Clip(s.where.args)}
		if after != nil {
			cond, args := s.page.cond(*after)
			w.add(cond, args...)
		}
		cands, err := s.candidates(ctx, w, batch)
		if err != nil {
			return nil, nil, readErr("search", err)
		}
		checked += len(cands)
		kept, err := s.check(ctx, cands)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range kept {
			// A version archived twice (a replay, a redrive) is one row
			// under FINAL: one hit.
			if !seen[changeKey{k.crawl, k.url}] {
				seen[changeKey{k.crawl, k.url}] = true
				out = append(out, k)
			}
		}
		if len(out) >= n || len(cands) < batch {
			return out[:min(len(out), n)], nil, nil
		}
		last := cands[len(cands)-1]
		after = &position{Time: millis(last.receivedAt), Score: last.score, CrawlID: last.crawl.String(), URL: last.url}
		batch = min(batch*4, maxBatch)
	}
}

// candidates reads the first n rows (of any version) that pass w, in sort
// order.
func (s search) candidates(ctx context.Context, w where, n int) ([]hitKey, error) {
	// The top-K filter on received_at takes the place of the text index's
	// direct read, and the text itself is then read for every match
	// (ClickHouse 26.7): off, the index answers alone, and the minmax
	// index still skips all but the newest granules.
	ctx = withSettings(ctx, s.r.optional(ctx, clickhouse.Settings{"use_top_k_dynamic_filtering": 0}))
	rows, err := s.r.conn.Query(ctx, "SELECT crawl_id, url, received_at, "+s.score+" AS score FROM "+s.r.db+".pages WHERE "+w.String()+
		" ORDER BY "+s.orderBy+" LIMIT {limit:UInt64}", append(w.args, clickhouse.Named("limit", uint64(n)))...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []hitKey
	for rows.Next() {
		var k hitKey
		if err := rows.Scan(&k.crawl, &k.url, &k.receivedAt, &k.score); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// check keeps the candidates that are their key's latest version, hold
// every phrase and are of the change class asked for, in their order: one
// query under FINAL by the candidates' keys, then the change classes of
// the URLs left.
func (s search) check(ctx context.Context, cands []hitKey) ([]hitKey, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	matches := "1"
	if len(s.phrases) > 0 {
		conds := make([]string, len(s.phrases))
		for i, p := range s.phrases {
			conds[i] = "match(markdown, " + p + ")"
		}
		matches = strings.Join(conds, " AND ")
	}
	latest := map[changeKey]time.Time{}
	err := s.byKeys(ctx, "SELECT crawl_id, url, received_at", " AND "+matches, cands, s.where.args, func(rows driver.Rows) error {
		var k changeKey
		var t time.Time
		if err := rows.Scan(&k.crawl, &k.url, &t); err != nil {
			return err
		}
		latest[k] = t
		return nil
	})
	if err != nil {
		return nil, readErr("search: the latest versions", err)
	}
	pass := func(k hitKey) bool {
		t, ok := latest[changeKey{k.crawl, k.url}]
		return ok && t.Equal(k.receivedAt)
	}
	if s.change != "" {
		var urls []string
		for _, k := range cands {
			if pass(k) {
				urls = append(urls, k.url)
			}
		}
		classes, err := s.r.changeClasses(ctx, urls)
		if err != nil {
			return nil, err
		}
		latestWithPhrases := pass
		pass = func(k hitKey) bool { return latestWithPhrases(k) && classes[changeKey{k.crawl, k.url}] == s.change }
	}
	var out []hitKey
	for _, k := range cands {
		if pass(k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// byKeys runs "selectCols FROM pages FINAL WHERE <the rows of keys> tail"
// and calls scan for each row of those keys. The key columns are bound by
// arrays (the primary key's ranges) and the exact pairs checked by
// ClickHouse, so only the granules of keys are read.
func (s search) byKeys(ctx context.Context, selectCols, tail string, keys []hitKey, args []any, scan func(driver.Rows) error) error {
	if len(keys) == 0 {
		return nil
	}
	crawls, urls := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		crawls[i], urls[i] = k.crawl.String(), k.url
	}
	rows, err := s.r.conn.Query(ctx, selectCols+" FROM "+s.r.db+".pages FINAL WHERE crawl_id IN {key_crawls:Array(UUID)} AND url IN {key_urls:Array(String)}"+
		" AND has(arrayZip({key_crawls:Array(UUID)}, {key_urls:Array(String)}), (crawl_id, url))"+tail,
		append(slices.Clip(args), clickhouse.Named("key_crawls", crawls), clickhouse.Named("key_urls", urls))...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// changeKey is a version's key: a job and a URL (in pages, one row per
// key under FINAL; in page_changes, one class).
type changeKey struct {
	crawl uuid.UUID
	url   string
}

// changeClasses reads the change class of every version of urls: one
// query on page_changes by URL, which reaches its table's key.
func (r *Reader) changeClasses(ctx context.Context, urls []string) (map[changeKey]string, error) {
	classes := map[changeKey]string{}
	if len(urls) == 0 {
		return classes, nil
	}
	rows, err := r.conn.Query(ctx, "SELECT crawl_id, url, change FROM "+r.db+".page_changes WHERE url IN {urls:Array(String)}",
		clickhouse.Named("urls", urls))
	if err != nil {
		return nil, readErr("change classes of the hits", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k changeKey
		var c string
		if err := rows.Scan(&k.crawl, &k.url, &c); err != nil {
			return nil, readErr("change classes of the hits", err)
		}
		classes[k] = c
	}
	if err := rows.Err(); err != nil {
		return nil, readErr("change classes of the hits", err)
	}
	return classes, nil
}
