package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/testkit/proccpu"
	"github.com/rs/zerolog"
)

// variant is the product's schema with one part of it taken away (or a
// codec changed), for the price of that part at insert.
type variant struct {
	name  string
	alter []string // run on the fresh schema before the copy; {db} is its database
}

// priceVariants are the full schema, then each skip index, materialized
// column and view fed by pages taken away alone, codecs of the text
// changed, everything taken away, and the full schema again (how much the
// machine moved meanwhile). They are read from the migrated schema, so a
// later migration's index or view is priced without changing this list.
func priceVariants(ctx context.Context, admin driver.Conn, db string) ([]variant, error) {
	full := variant{name: "full schema (as migrated)"}
	vs := []variant{full}
	var all []string
	indexes, err := strings1(ctx, admin, "SELECT name FROM system.data_skipping_indices WHERE database = ? AND table = 'pages' ORDER BY name", db)
	if err != nil {
		return nil, err
	}
	for _, i := range indexes {
		q := "ALTER TABLE {db}.pages DROP INDEX " + i
		vs = append(vs, variant{"without index " + i, []string{q}})
		all = append(all, q)
	}
	views, err := strings1(ctx, admin, "SELECT arrayJoin(dependencies_table) AS v FROM system.tables WHERE database = ? AND name = 'pages' ORDER BY v", db)
	if err != nil {
		return nil, err
	}
	for _, v := range views {
		q := "DROP VIEW {db}." + v + " SYNC"
		vs = append(vs, variant{"without view " + v, []string{q}})
		all = append(all, q)
	}
	// Materialized columns no index or view reads (host feeds host_bloom:
	// both go together).
	vs = append(vs,
		variant{"without content_hash (MATERIALIZED)", []string{"ALTER TABLE {db}.pages DROP COLUMN content_hash"}},
		variant{"without host and host_bloom", []string{"ALTER TABLE {db}.pages DROP INDEX host_bloom", "ALTER TABLE {db}.pages DROP COLUMN host"}},
		variant{"content CODEC(ZSTD(1))", []string{"ALTER TABLE {db}.pages MODIFY COLUMN content String CODEC(ZSTD(1))"}},
		variant{"content CODEC(ZSTD(3))", []string{"ALTER TABLE {db}.pages MODIFY COLUMN content String CODEC(ZSTD(3))"}},
		variant{"content CODEC(ZSTD(6))", []string{"ALTER TABLE {db}.pages MODIFY COLUMN content String CODEC(ZSTD(6))"}},
		variant{"content CODEC(LZ4)", []string{"ALTER TABLE {db}.pages MODIFY COLUMN content String CODEC(LZ4)"}},
		variant{"document_cut CODEC(ZSTD(1))", []string{"ALTER TABLE {db}.pages MODIFY COLUMN document_cut String CODEC(ZSTD(1))"}},
		variant{"no skip index, no view", all},
		full,
	)
	return vs, nil
}

// reportPrice copies the rows of <db>.pages, server-side (INSERT ...
// SELECT), into a freshly migrated database once per variant, and prints
// the copy's rate, ClickHouse's CPU per page when its process is known
// (CLICKHOUSE_PID: scripts/bench-archive.sh starts it), and the bytes the
// copy left (active parts, before any merge but the copy's own).
func reportPrice(ctx context.Context, admin, conn driver.Conn, o options, out io.Writer) error {
	pid, _ := strconv.Atoi(os.Getenv("CLICKHOUSE_PID"))
	var pages uint64
	if err := admin.QueryRow(ctx, "SELECT count() FROM "+o.db+".pages").Scan(&pages); err != nil {
		return err
	}
	cols, err := strings1(ctx, admin, "SELECT name FROM system.columns WHERE database = ? AND table = 'pages' AND default_kind NOT IN ('ALIAS', 'MATERIALIZED') ORDER BY position", o.db)
	if err != nil {
		return err
	}
	list := strings.Join(cols, ", ")
	db := o.db + "_price"
	cfg := archive.Config{Addr: o.addr, Database: db, User: "default"}
	fmt.Fprintf(out, "\nthe schema's price at insert: the %d rows of %s.pages copied by ClickHouse (INSERT ... SELECT) into a fresh schema per line\n", pages, o.db)
	fmt.Fprintf(out, "  %-44s %9s %10s %12s %12s %11s %11s\n", "schema", "copy s", "rows/s", "CH CPU µs/pg", "vs full", "pages kB/pg", "db kB/pg")
	variants, err := priceVariants(ctx, admin, o.db)
	if err != nil {
		return err
	}
	var fullCPU float64
	for i, v := range variants {
		if err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" SYNC"); err != nil {
			return err
		}
		if _, err := schema.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
			return fmt.Errorf("migrate %s: %w", db, err)
		}
		if err := alter(ctx, admin, db, v.alter); err != nil {
			fmt.Fprintf(out, "  %-44s (not measured: %v)\n", v.name, err)
			continue
		}
		cpu0, start := proccpu.WithChildren(pid), time.Now()
		if err := admin.Exec(ctx, "INSERT INTO "+db+".pages ("+list+") SELECT "+list+" FROM "+o.db+".pages"); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		secs, cpu := time.Since(start).Seconds(), proccpu.WithChildren(pid)-cpu0
		var pagesBytes, dbBytes uint64
		if err := admin.QueryRow(ctx, "SELECT sumIf(bytes_on_disk, table = 'pages'), sum(bytes_on_disk) FROM system.parts WHERE active AND database = ?", db).Scan(&pagesBytes, &dbBytes); err != nil {
			return err
		}
		perPage := 1e6 * cpu / float64(pages)
		if i == 0 {
			fullCPU = perPage
		}
		delta := "–"
		if pid > 0 && i > 0 {
			delta = fmt.Sprintf("%+.0f (%+.0f%%)", perPage-fullCPU, 100*(perPage-fullCPU)/fullCPU)
		}
		cpuText := "–"
		if pid > 0 {
			cpuText = fmt.Sprintf("%.0f", perPage)
		}
		fmt.Fprintf(out, "  %-44s %9.1f %10.0f %12s %12s %11.2f %11.2f\n", v.name, secs, float64(pages)/secs, cpuText, delta,
			float64(pagesBytes)/float64(pages)/1e3, float64(dbBytes)/float64(pages)/1e3)
	}
	return admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" SYNC")
}

func alter(ctx context.Context, admin driver.Conn, db string, qs []string) error {
	for _, q := range qs {
		if err := admin.Exec(ctx, strings.ReplaceAll(q, "{db}", db)); err != nil {
			return err
		}
	}
	return nil
}

// strings1 is the first column of a query's rows.
func strings1(ctx context.Context, admin driver.Conn, q string, args ...any) ([]string, error) {
	rows, err := admin.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
