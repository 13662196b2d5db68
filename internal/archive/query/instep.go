package query

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

// inStep is a cursor over rows in URL order (the URL first, then a T)
// read beside an export's own rows, also in URL order: the two advance
// together, so that one row of each is held at a time, whatever the job's
// size. The WARC export reads its revisits' previous versions this way,
// the NDJSON export the markdowns its diffs compare with.
type inStep[T any] struct {
	rows driver.Rows
	what string // the read, for errors
	scan func(driver.Rows, *string, *T) error
	url  string // of cur; "" past the last
	cur  T
	done bool
	err  error
}

// readInStep runs query (in URL order, with the job as {job:UUID}) for an
// export of job; scan reads a row's URL and value.
func readInStep[T any](ctx context.Context, r *Reader, what, query string, job uuid.UUID, scan func(driver.Rows, *string, *T) error) (*inStep[T], error) {
	rows, err := r.conn.Query(exporting(ctx), query, clickhouse.Named("job", job.String()))
	if err != nil {
		return nil, readErr(what, err)
	}
	p := &inStep[T]{rows: rows, what: what, scan: scan}
	p.advance()
	return p, nil
}

// notInStep is the cursor of an export that reads nothing beside its rows.
func notInStep[T any]() *inStep[T] { return &inStep[T]{done: true} }

func (p *inStep[T]) advance() {
	if p.done {
		return
	}
	if !p.rows.Next() {
		p.done, p.url = true, ""
		if err := p.rows.Err(); err != nil {
			p.err = readErr(p.what, err)
		}
		return
	}
	if err := p.scan(p.rows, &p.url, &p.cur); err != nil {
		p.done, p.url, p.err = true, "", readErr(p.what, err)
	}
}

// of returns the value of u, given URLs in ascending order (the order
// ClickHouse and Go compare strings in: by bytes).
func (p *inStep[T]) of(u string) (T, bool) {
	for !p.done && p.url < u {
		p.advance()
	}
	return p.cur, !p.done && p.url == u
}

func (p *inStep[T]) close() {
	if p.rows != nil {
		p.rows.Close()
	}
}
