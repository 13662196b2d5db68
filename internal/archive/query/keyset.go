package query

import (
	"context"
	"slices"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// keyset is how a list of the read API pages: by its sort key. Each page
// starts strictly after the key of the previous page's last row, which its
// cursor holds (a position, signed with the fingerprint of the list's
// query), so pages stay stable while rows are inserted: a row whose key
// sorts before the cursor is not shown in later pages, and no row is shown
// twice. A page reads one row more than its size to know whether another
// page follows.
type keyset struct {
	// query is the fingerprint of the list's query (fingerprint): a cursor
	// of another query is refused.
	query string
	// cursor is the Next of the previous page; "": the first page.
	cursor string
	// limit is the page's size (pageSize).
	limit int
	// key is the sort key, as SQL: one column or a tuple of them. after is
	// the cursor's values of it, in the same order, as the named
	// parameters keysetArgs binds from a position: {t}, {t2}, {s}, {c},
	// {u} and {k}.
	key, after string
	// index, when set, bounds the key's first column alone by the cursor
	// as well: the bound a minmax index reads (it cannot read a tuple's).
	index string
	// ascending pages upwards (the rows after the cursor have a greater
	// key); otherwise downwards, newest first.
	ascending bool
	// follow makes Next continue every page, the last too: after its last
	// row, or where the cursor was when there was none (a feed, polled
	// with it until rows come). The cursor of a first page without rows is
	// the zero position, so a list that follows has no key at or before
	// it (the feed's keys start with a time after 1970).
	follow bool
	// what names the list in its errors (readErr).
	what string
}

// start reads k's cursor: the position the page starts after, nil on the
// first page. A cursor altered, or of another query, is a ParamError of
// "cursor".
func (k keyset) start(r *Reader) (*position, error) {
	after, ok, err := r.decodeCursor(k.cursor, k.query)
	if err != nil || !ok {
		return nil, err
	}
	return &after, nil
}

// cond is the condition keeping the rows after p, and its parameters.
func (k keyset) cond(p position) (string, []any) {
	op := " < "
	if k.ascending {
		op = " > "
	}
	cond := k.key + op + k.after
	if k.index != "" {
		cond = k.index + " AND " + cond
	}
	return cond, keysetArgs(p)
}

// keysetArgs are a position's values as the named parameters of a
// keyset's after: each is bound, whether or not the key holds it.
func keysetArgs(p position) []any {
	return []any{
		clickhouse.Named("t", p.Time), clickhouse.Named("t2", p.Time2), clickhouse.Named("s", p.Score),
		clickhouse.Named("c", orNil(p.CrawlID)), clickhouse.Named("u", p.URL), clickhouse.Named("k", p.Kind),
	}
}

// pager gathers a page's rows, read in k's order with LIMIT limit+1, and
// the position of the page's last row.
type pager[T any] struct {
	k    keyset
	rows []T
	last position
}

// add takes the next row, whose sort key is at.
func (p *pager[T]) add(row T, at position) {
	p.rows = append(p.rows, row)
	if len(p.rows) <= p.k.limit {
		p.last = at
	}
}

// page is the page's rows, at most limit, and the cursor of the next page:
// after the last row when a row more was read (or k follows), "" at the
// end.
func (p *pager[T]) page(r *Reader) (rows []T, next string) {
	switch {
	case len(p.rows) > p.k.limit:
		rows = p.rows[:p.k.limit]
	case !p.k.follow:
		return p.rows, ""
	case len(p.rows) == 0 && p.k.cursor != "":
		return nil, p.k.cursor
	case len(p.rows) == 0:
		return nil, r.encodeCursor(position{Query: p.k.query})
	default:
		rows = p.rows
	}
	p.last.Query = p.k.query
	return rows, r.encodeCursor(p.last)
}

// readPage reads a page of k: the rows of the query that sql writes (up to
// its ORDER BY, in k's order) from the WHERE it is given (w, with the
// cursor's condition), each scanned with its sort key, and the cursor of
// the next page. The query's LIMIT is bound as {limit:UInt64}, which the
// query may also use inside.
func readPage[T any](ctx context.Context, r *Reader, k keyset, w where, sql func(where string) string, scan func(driver.Rows) (T, position, error)) ([]T, string, error) {
	after, err := k.start(r)
	if err != nil {
		return nil, "", err
	}
	w = where{conds: slices.Clip(w.conds), args: slices.Clip(w.args)}
	if after != nil {
		cond, args := k.cond(*after)
		w.add(cond, args...)
	}
	w.args = append(w.args, clickhouse.Named("limit", uint64(k.limit+1)))
	rows, err := r.conn.Query(ctx, sql(w.String())+" LIMIT {limit:UInt64}", w.args...)
	if err != nil {
		return nil, "", readErr(k.what, err)
	}
	defer rows.Close()
	p := pager[T]{k: k}
	for rows.Next() {
		row, at, err := scan(rows)
		if err != nil {
			return nil, "", readErr(k.what, err)
		}
		p.add(row, at)
	}
	if err := rows.Err(); err != nil {
		return nil, "", readErr(k.what, err)
	}
	page, next := p.page(r)
	return page, next, nil
}
