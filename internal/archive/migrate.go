package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/config"
	"github.com/rs/zerolog"
)

// Migration is one versioned schema file, rendered for a configuration.
type Migration struct {
	// Version is the number the file name starts with ("0001_pages.sql" → 1).
	Version uint32
	// Name is the file name.
	Name string
	// Statements are the rendered DDL statements, in order.
	Statements []string
	// Checksum identifies the file's template text.
	Checksum string
}

// Migrations renders the embedded migrations (config/migrations) for cfg.
func Migrations(cfg Config) ([]Migration, error) {
	return render(config.Migrations, "migrations", cfg)
}

func render(fsys fs.FS, dir string, cfg Config) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []Migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.ParseUint(num, 10, 32)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a version number and '_'", base)
		}
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		stmts, err := Render(cfg, base, string(text))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(text)
		out = append(out, Migration{Version: uint32(v), Name: base, Statements: stmts, Checksum: hex.EncodeToString(sum[:8])})
	}
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].Name, out[i].Name, out[i].Version)
		}
	}
	return out, nil
}

// Render expands a migration template for cfg and splits it into statements
// (a semicolon at the end of a line ends one). The template functions make
// one file serve both a single server and a cluster:
//
//	{{table "pages"}}        the table that holds the rows: db.pages, or db.pages_local on a cluster
//	{{global "pages"}}       the table to read and insert through: db.pages (Distributed on a cluster)
//	{{view "name"}}          a (materialized) view next to the local tables: db.name
//	{{on_cluster}}           "" or " ON CLUSTER 'name'"
//	{{engine "ReplacingMergeTree" "received_at"}}
//	                         the engine, Replicated* on a cluster, with its version column
//	{{distributed "pages" "cityHash64(crawl_id, url)"}}
//	                         on a cluster, the Distributed table over the local one, sharded by the key
func Render(cfg Config, name, text string) ([]string, error) {
	db := cfg.Database
	cluster := cfg.Cluster
	local := func(t string) string {
		if cluster != "" {
			return t + "_local"
		}
		return t
	}
	funcs := template.FuncMap{
		"table":  func(t string) string { return db + "." + local(t) },
		"global": func(t string) string { return db + "." + t },
		"view":   func(t string) string { return db + "." + t },
		"on_cluster": func() string {
			if cluster == "" {
				return ""
			}
			return " ON CLUSTER '" + cluster + "'"
		},
		"engine": func(kind, version string) string {
			var args []string
			if cluster != "" {
				kind = "Replicated" + kind
				args = append(args, "'/clickhouse/tables/{shard}/{database}/{table}'", "'{replica}'")
			}
			if version != "" {
				args = append(args, version)
			}
			if len(args) == 0 {
				return kind
			}
			return kind + "(" + strings.Join(args, ", ") + ")"
		},
		"distributed": func(t, shardingKey string) string {
			if cluster == "" {
				return ""
			}
			return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER '%s' AS %s.%s\nENGINE = Distributed('%s', '%s', '%s', %s);",
				db, t, cluster, db, local(t), cluster, db, local(t), shardingKey)
		},
	}
	tpl, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("migration %s: %w", name, err)
	}
	var b strings.Builder
	if err := tpl.Execute(&b, nil); err != nil {
		return nil, fmt.Errorf("migration %s: %w", name, err)
	}
	return splitStatements(b.String()), nil
}

// splitStatements cuts SQL at semicolons that end a line and drops pieces
// that hold only comments and blanks.
func splitStatements(sql string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		if hasCode(s) {
			out = append(out, s)
		}
	}
	for line := range strings.SplitSeq(sql, "\n") {
		trimmed := strings.TrimRight(line, " \t\r")
		if strings.HasSuffix(trimmed, ";") && !strings.HasPrefix(strings.TrimSpace(trimmed), "--") {
			cur.WriteString(strings.TrimSuffix(trimmed, ";"))
			flush()
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
	}
	flush()
	return out
}

func hasCode(s string) bool {
	for line := range strings.SplitSeq(s, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
			return true
		}
	}
	return false
}

// Migrate creates the database and the migrations table, then applies, in
// order, every migration not yet recorded there, and records it. Every
// statement is idempotent (IF NOT EXISTS), so two sinks starting at once, or a
// crash between a statement and its record, only repeat harmless work. It
// returns the names of the migrations it applied.
func Migrate(ctx context.Context, conn driver.Conn, cfg Config, log zerolog.Logger) ([]string, error) {
	migrations, err := Migrations(cfg)
	if err != nil {
		return nil, err
	}
	onCluster := ""
	if cfg.Cluster != "" {
		onCluster = " ON CLUSTER '" + cfg.Cluster + "'"
	}
	setup, err := Render(cfg, "schema_migrations", `
CREATE DATABASE IF NOT EXISTS `+cfg.Database+onCluster+`;
-- The record of applied migrations: replicated on a cluster (ON CLUSTER DDL
-- runs everywhere, so every replica's record is the same), never sharded.
CREATE TABLE IF NOT EXISTS {{view "schema_migrations"}}{{on_cluster}}
(
    version    UInt32,
    name       String,
    checksum   String,
    applied_at DateTime64(3, 'UTC')
)
ENGINE = {{engine "ReplacingMergeTree" "applied_at"}}
ORDER BY version;
`)
	if err != nil {
		return nil, err
	}
	for _, stmt := range setup {
		if err := conn.Exec(ctx, stmt); err != nil {
			return nil, fmt.Errorf("prepare migrations: %w", err)
		}
	}
	applied, err := appliedMigrations(ctx, conn, cfg)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, m := range migrations {
		if sum, ok := applied[m.Version]; ok {
			if sum != m.Checksum {
				log.Warn().Str("migration", m.Name).Msg("migration file changed after it was applied; a schema change needs a new file")
			}
			continue
		}
		for i, stmt := range m.Statements {
			if err := conn.Exec(ctx, stmt); err != nil {
				return done, fmt.Errorf("migration %s, statement %d: %w", m.Name, i+1, err)
			}
		}
		if err := conn.Exec(ctx, "INSERT INTO "+cfg.Database+".schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
			m.Version, m.Name, m.Checksum, time.Now().UTC()); err != nil {
			return done, fmt.Errorf("record migration %s: %w", m.Name, err)
		}
		log.Info().Str("migration", m.Name).Msg("migration applied")
		done = append(done, m.Name)
	}
	return done, nil
}

func appliedMigrations(ctx context.Context, conn driver.Conn, cfg Config) (map[uint32]string, error) {
	rows, err := conn.Query(ctx, "SELECT version, argMax(checksum, applied_at) FROM "+cfg.Database+".schema_migrations GROUP BY version")
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	defer rows.Close()
	out := map[uint32]string{}
	for rows.Next() {
		var v uint32
		var sum string
		if err := rows.Scan(&v, &sum); err != nil {
			return nil, err
		}
		out[v] = sum
	}
	return out, rows.Err()
}
