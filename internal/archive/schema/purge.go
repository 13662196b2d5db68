package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/takedown"
)

// purgeTarget is a table rows are removed from and how a selector names
// its rows there: the URL column ("" when the table has none), and the job
// column and its type.
type purgeTarget struct {
	table, url, job string
	jobIsUUID       bool
	// urlIn is an expression of the row's URLs, for a table that holds
	// them inside a body (events): a row matches when one of them does.
	urlIn string
}

// eventURLs are the URLs of a raw event as the write path reads them
// (takedown.Selector.MatchBody): every JSON string of the body, its
// escapes decoded ("https:\/\/b\u00fccher.example" is a spelling too),
// that starts with an origin.
var eventURLs = `arrayFilter(x -> ` + originOf("x") + ` != '', arrayMap(s -> JSONExtractString(concat('"', s, '"')), extractAll(event, '"((?:[^"\\\\]|\\\\.)*)"')))`

// purgeTargets are the tables a takedown removes rows from: the pages and
// their failures, the change records (page_versions, and monitor checks'
// per-URL rows), the URLs robots.txt blocked, the raw events and a job's
// lifecycle events. The per-job aggregates (crawl_stats: counts, when the
// job started, the webhook metadata the team set) hold no content and are
// left: a job's counts stay what they were.
var purgeTargets = []purgeTarget{
	{table: "pages", url: "url", job: "crawl_id", jobIsUUID: true},
	{table: "failures", url: "url", job: "crawl_id", jobIsUUID: true},
	{table: "page_versions", url: "url", job: "crawl_id", jobIsUUID: true},
	{table: "blocked_urls", url: "url", job: "crawl_id", jobIsUUID: true},
	{table: "monitor_pages", url: "url"},
	{table: "events", job: "job_id", urlIn: eventURLs},
	{table: "crawl_events", job: "crawl_id", jobIsUUID: true},
}

// How the purge finds a URL selector's rows in every spelling. ClickHouse
// cannot map a host as takedown.NormalizeHost does (IDNA, full-width
// forms, percent escapes), so the normalisation stays in Go, in one place:
// the purge first reads the distinct origins of the table as written
// (cut by takedown.OriginPattern, as the write path cuts them) among those
// that may be a spelling of the selector's host, keeps those that
// normalise to it, and then removes the rows whose origin is one of them
// (and, for a URL or a prefix, whose rest matches). A takedown names few
// hosts and the origins are read from one column: the cost is one scan of
// the table, like the count before it.

// originsPerStatement bounds the bytes of origins one statement names;
// more make several statements.
const originsPerStatement = 256 << 10

// purgeSettings lets a statement name that many bytes of origins.
var purgeSettings = clickhouse.Settings{"max_query_size": 4 * originsPerStatement}

// purgeStep is one condition selecting rows of a table, with its arguments.
type purgeStep struct {
	table, where string
	args         []any
}

// originOf is the origin of URL expression u as written, cut as the write
// path cuts it (takedown.OriginPattern, an RE2 expression in both).
func originOf(u string) string {
	return "extract(" + u + ", '" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(takedown.OriginPattern) + "')"
}

// names reports whether the table can hold rows sel names.
func (p purgeTarget) names(sel takedown.Selector) bool {
	if sel.Kind == takedown.KindJob {
		return p.job != ""
	}
	return p.url != "" || p.urlIn != ""
}

// urlExpr is the table's URL column, or the lambda variable over urlIn.
func (p purgeTarget) urlExpr() string {
	if p.url != "" {
		return p.url
	}
	return "u"
}

// onURLs wraps a condition on urlExpr for the table: as is for a URL
// column, true for any URL of the body for urlIn.
func (p purgeTarget) onURLs(cond string) string {
	if p.url != "" {
		return cond
	}
	return "arrayExists(u -> " + cond + ", " + p.urlIn + ")"
}

// candidateOrigins are the distinct origins as written in the table that
// may be a spelling of host (an ASCII, normalised host): those holding it
// in any case, and those with a byte a normalisation maps (non-ASCII,
// percent escapes).
func (p purgeTarget) candidateOrigins(ctx context.Context, conn driver.Conn, db, host string) ([]string, error) {
	from, args := db+"."+p.table, []any{}
	origin := originOf(p.urlExpr())
	if p.url == "" {
		// Only the bodies that may name such an origin are decoded: those
		// holding the host, or a byte a normalisation or a JSON escape maps.
		from = "(SELECT arrayJoin(arrayMap(u -> " + origin + ", " + p.urlIn + ")) AS o FROM " + from +
			` WHERE positionCaseInsensitive(event, ?) > 0 OR length(event) != lengthUTF8(event) OR position(event, '%') > 0 OR position(event, '\\u') > 0)`
		origin, args = "o", append(args, host)
	}
	rows, err := conn.Query(clickhouse.Context(ctx, clickhouse.WithSettings(purgeSettings)),
		"SELECT DISTINCT "+origin+" AS o FROM "+from+
			" WHERE positionCaseInsensitive(o, ?) > 0 OR length(o) != lengthUTF8(o) OR position(o, '%') > 0", append(args, host)...)
	if err != nil {
		return nil, fmt.Errorf("read the origins of %s: %w", p.table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return nil, fmt.Errorf("read the origins of %s: %w", p.table, err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// steps are the conditions selecting sel's rows of the table, which names
// them (none when it holds none).
func (p purgeTarget) steps(ctx context.Context, conn driver.Conn, db string, sel takedown.Selector) ([]purgeStep, error) {
	if sel.Kind == takedown.KindJob {
		if p.jobIsUUID {
			return []purgeStep{{p.table, p.job + " = toUUID(?)", []any{sel.Value}}}, nil
		}
		return []purgeStep{{p.table, p.job + " = ?", []any{sel.Value}}}, nil
	}
	var want takedown.Location
	host := sel.Value
	if sel.Kind != takedown.KindHost {
		loc, ok := takedown.ParseLocation(sel.Value)
		if !ok {
			return nil, nil
		}
		want, host = loc, loc.Origin.Host
	}
	host = takedown.NormalizeHost(host)
	candidates, err := p.candidateOrigins(ctx, conn, db, host)
	if err != nil {
		return nil, err
	}
	var spellings []string
	for _, raw := range candidates {
		o, ok := takedown.ParseOrigin(raw)
		if ok && o.Host == host && (sel.Kind == takedown.KindHost || o == want.Origin) {
			spellings = append(spellings, raw)
		}
	}
	// The rest after the origin, read as takedown.NormalizeRest reads it.
	u := p.urlExpr()
	rest := "substring(" + u + ", length(" + originOf(u) + ") + 1)"
	rest = "if(" + rest + " = '' OR substring(" + rest + ", 1, 1) IN ('?', '#'), concat('/', " + rest + "), " + rest + ")"
	var out []purgeStep
	for len(spellings) > 0 {
		n, size := 0, 0
		for n < len(spellings) && (n == 0 || size+len(spellings[n]) <= originsPerStatement) {
			size += len(spellings[n])
			n++
		}
		cond := "has(?, " + originOf(u) + ")"
		args := []any{spellings[:n]}
		switch {
		case sel.Kind == takedown.KindURL:
			cond += " AND " + rest + " = ?"
			args = append(args, want.Rest)
		case sel.Kind == takedown.KindPrefix && want.Rest != "/":
			// takedown.Location.HasPrefix: the prefix's rest, ending at a
			// boundary or followed by one.
			cond += " AND startsWith(" + rest + ", ?)"
			args = append(args, want.Rest)
			if !takedown.EndsAtBoundary(want.Rest) {
				cond += " AND substring(" + rest + ", ?, 1) IN ('', '/', '?', '#')"
				args = append(args, len(want.Rest)+1)
			}
		}
		out = append(out, purgeStep{p.table, p.onURLs(cond), args})
		spellings = spellings[n:]
	}
	return out, nil
}

// Count returns how many rows of each table sel covers: what Purge would
// remove now (`sink delete --dry-run`).
func Count(ctx context.Context, conn driver.Conn, cfg archive.Config, sel takedown.Selector) (map[string]uint64, error) {
	counts, _, err := count(ctx, conn, cfg, sel)
	return counts, err
}

// count returns the rows of each table sel covers and the steps naming the
// tables that hold some.
func count(ctx context.Context, conn driver.Conn, cfg archive.Config, sel takedown.Selector) (map[string]uint64, []purgeStep, error) {
	counts := map[string]uint64{}
	var nonEmpty []purgeStep
	for _, p := range purgeTargets {
		if !p.names(sel) {
			continue
		}
		steps, err := p.steps(ctx, conn, cfg.Database, sel)
		if err != nil {
			return counts, nil, err
		}
		counts[p.table] = 0
		for _, s := range steps {
			var n uint64
			if err := conn.QueryRow(clickhouse.Context(ctx, clickhouse.WithSettings(purgeSettings)),
				"SELECT count() FROM "+cfg.Database+"."+s.table+" WHERE "+s.where, s.args...).Scan(&n); err != nil {
				return counts, nil, fmt.Errorf("count the rows of %s to remove: %w", s.table, err)
			}
			counts[p.table] += n
			if n > 0 {
				nonEmpty = append(nonEmpty, s)
			}
		}
	}
	return counts, nonEmpty, nil
}

// Purge removes every row sel covers from the archive's tables, in every
// spelling of its host (takedown.NormalizeHost), with ALTER TABLE ...
// DELETE (a mutation: the parts holding them are rewritten without them,
// so the content is gone from disk, not only hidden) waited for, ON
// CLUSTER on a cluster. It returns the rows removed per table, counted
// just before. Run again it removes what is left (nothing, or rows an
// insert under way added): a takedown interrupted midway is finished by
// running it again.
func Purge(ctx context.Context, conn driver.Conn, cfg archive.Config, sel takedown.Selector) (map[string]uint64, error) {
	return purge(ctx, []driver.Conn{conn}, cfg, clusterDDL, sel)
}

// PurgeNodes is Purge for a cluster without ON CLUSTER DDL (MigrateNodes):
// the mutation runs on each node's local tables in turn.
func PurgeNodes(ctx context.Context, nodes []driver.Conn, cfg archive.Config, sel takedown.Selector) (map[string]uint64, error) {
	if len(nodes) == 0 || cfg.Cluster == "" {
		return nil, errors.New("purge nodes: needs nodes and CLICKHOUSE_CLUSTER")
	}
	return purge(ctx, nodes, cfg, renderMode{perNode: true}, sel)
}

func purge(ctx context.Context, nodes []driver.Conn, cfg archive.Config, mode renderMode, sel takedown.Selector) (map[string]uint64, error) {
	counts, steps, err := count(ctx, nodes[0], cfg, sel)
	if err != nil {
		return counts, err
	}
	for _, s := range steps {
		stmt, err := renderWith(cfg, mode, "purge", `ALTER TABLE {{table "`+s.table+`"}}{{on_cluster}} DELETE WHERE `+s.where+` SETTINGS mutations_sync = 2`, nil)
		if err != nil {
			return counts, err
		}
		for _, conn := range nodes {
			if err := conn.Exec(clickhouse.Context(ctx, clickhouse.WithSettings(purgeSettings)), stmt[0], s.args...); err != nil {
				return counts, fmt.Errorf("remove the rows of %s: %w", s.table, err)
			}
		}
	}
	return counts, nil
}

// WaitInserts returns once every INSERT running on ClickHouse when it was
// called has ended (on every node, on a cluster): after a takedown is
// recorded, an insert that started before it, and so before the write
// path's filter could see it, has landed once this returns, and Purge
// removes its rows too.
func WaitInserts(ctx context.Context, conn driver.Conn, cfg archive.Config) error {
	return waitInserts(ctx, conn, cfg, clusterDDL)
}
