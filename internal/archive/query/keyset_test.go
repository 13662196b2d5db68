package query

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
)

// TestKeysetPages: readPage against a real ClickHouse, on a list of the
// numbers from 1 to a count (numbers()), pages of 3: an empty list, exactly a
// page, a page and one row, several pages both ways, a feed's cursor that
// always continues, and cursors altered or of another query.
func TestKeysetPages(t *testing.T) {
	t.Parallel()
	addr, db := clickhousetest.NewDatabase(t)
	r, err := NewReader(clickhousetest.Open(t, db), archive.Config{Addr: addr, Database: db, User: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err = r.WithReadOptions(ReadOptions{CursorKey: []byte("test key")}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const limit = 3
	list := func(count uint64, ascending, follow bool) keyset {
		return keyset{query: fingerprint("numbers", count, ascending), limit: limit, what: "numbers",
			key: "n", after: "{s:UInt64}", index: "n >= 0", ascending: ascending, follow: follow}
	}
	read := func(k keyset, count uint64) ([]uint64, string, error) {
		order := " DESC"
		if k.ascending {
			order = ""
		}
		w := where{args: []any{clickhouse.Named("count", count)}}
		return readPage(ctx, r, k, w, func(where string) string {
			return "SELECT number + 1 AS n FROM numbers({count:UInt64}) WHERE " + where + " ORDER BY n" + order
		}, func(rows driver.Rows) (uint64, position, error) {
			var n uint64
			err := rows.Scan(&n)
			return n, position{Score: n}, err
		})
	}
	// walk reads every page of k, at most 10, and returns them.
	walk := func(t *testing.T, k keyset, count uint64) [][]uint64 {
		t.Helper()
		var pages [][]uint64
		for range 10 {
			rows, next, err := read(k, count)
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, rows)
			if next == "" {
				return pages
			}
			k.cursor = next
		}
		t.Fatalf("no end after 10 pages: %v", pages)
		return nil
	}

	for _, tc := range []struct {
		name      string
		count     uint64
		ascending bool
		want      [][]uint64
	}{
		{"empty", 0, false, [][]uint64{nil}},
		{"fewer than a page", 2, false, [][]uint64{{2, 1}}},
		{"exactly a page", 3, false, [][]uint64{{3, 2, 1}}},
		{"a page and one row", 4, false, [][]uint64{{4, 3, 2}, {1}}},
		{"several pages", 7, false, [][]uint64{{7, 6, 5}, {4, 3, 2}, {1}}},
		{"several pages upwards", 7, true, [][]uint64{{1, 2, 3}, {4, 5, 6}, {7}}},
		{"exactly two pages upwards", 6, true, [][]uint64{{1, 2, 3}, {4, 5, 6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := walk(t, list(tc.count, tc.ascending, false), tc.count)
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("pages %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("a feed's cursor always continues", func(t *testing.T) {
		k := list(4, true, true)
		rows, start, err := read(k, 0)
		if err != nil || len(rows) != 0 || start == "" {
			t.Fatalf("empty feed: rows %v, next %q, %v", rows, start, err)
		}
		k.cursor = start
		if rows, next, err := read(k, 4); err != nil || !slices.Equal(rows, []uint64{1, 2, 3}) || next == "" {
			t.Fatalf("from the empty feed's cursor: rows %v, next %q, %v", rows, next, err)
		} else {
			k.cursor = next
		}
		rows, next, err := read(k, 4)
		if err != nil || !slices.Equal(rows, []uint64{4}) || next == "" {
			t.Fatalf("the last rows: %v, next %q, %v", rows, next, err)
		}
		k.cursor = next
		if rows, again, err := read(k, 4); err != nil || len(rows) != 0 || again != next {
			t.Fatalf("nothing new: rows %v, next %q (want the same cursor %q), %v", rows, again, next, err)
		}
		// Rows come: they follow from the same cursor.
		if rows, _, err := read(k, 6); err != nil || !slices.Equal(rows, []uint64{5, 6}) {
			t.Fatalf("after rows came: %v, %v", rows, err)
		}
	})

	t.Run("cursors refused", func(t *testing.T) {
		k := list(7, false, false)
		_, next, err := read(k, 7)
		if err != nil || next == "" {
			t.Fatalf("first page: next %q, %v", next, err)
		}
		body, sig, _ := strings.Cut(next, ".")
		flip := func(s string) string {
			b := []byte(s)
			if b[0] == 'A' {
				b[0] = 'B'
			} else {
				b[0] = 'A'
			}
			return string(b)
		}
		other := list(8, false, false)
		other.cursor = next
		for _, c := range []struct {
			name string
			k    keyset
		}{
			{"body altered", keyset{cursor: flip(body) + "." + sig}},
			{"signature altered", keyset{cursor: body + "." + flip(sig)}},
			{"no signature", keyset{cursor: body}},
			{"not base64", keyset{cursor: "!!." + sig}},
			{"too long", keyset{cursor: strings.Repeat("A", maxCursor+1)}},
			{"of another query", other},
		} {
			t.Run(c.name, func(t *testing.T) {
				q := c.k
				if q.query == "" {
					q = k
					q.cursor = c.k.cursor
				}
				rows, next, err := read(q, 7)
				var pe *ParamError
				if !errors.As(err, &pe) || pe.Param != "cursor" {
					t.Fatalf("rows %v, next %q, error %v: want a ParamError of cursor", rows, next, err)
				}
			})
		}
	})
}
