package schema

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	"github.com/crawlhouse/crawlhouse/internal/archive"
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
func Migrations(cfg archive.Config) ([]Migration, error) {
	return render(config.Migrations, "migrations", cfg, clusterDDL)
}

// NodeOptions say how NodeMigrations and MigrateNodes render a cluster's
// schema for its nodes one by one.
type NodeOptions struct {
	// Replicated keeps the Replicated* engines (nodes with a Keeper). Without
	// it every node gets the plain engine: a cluster of shards of one
	// unreplicated node each.
	Replicated bool
}

// NodeMigrations renders the migrations as ON CLUSTER DDL runs them on each
// node of cfg.Cluster: the same statements without ON CLUSTER, the same
// _local tables, Distributed tables and views, and the engines o asks for.
// It is for clusters where ON CLUSTER cannot run (no Keeper, or a node at a
// time by hand); MigrateNodes applies it.
func NodeMigrations(cfg archive.Config, o NodeOptions) ([]Migration, error) {
	if cfg.Cluster == "" {
		return nil, errors.New("node migrations need CLICKHOUSE_CLUSTER: the Distributed tables name the cluster")
	}
	return render(config.Migrations, "migrations", cfg, renderMode{perNode: true, replicated: o.Replicated})
}

// renderMode is how a cluster's DDL is rendered: ON CLUSTER from one node
// (clusterDDL), or per node, as ON CLUSTER would run it on each.
type renderMode struct {
	perNode    bool
	replicated bool
}

var clusterDDL = renderMode{replicated: true}

func render(fsys fs.FS, dir string, cfg archive.Config, mode renderMode) ([]Migration, error) {
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
		stmts, err := renderMigration(cfg, mode, base, string(text))
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

// onNode is what {{on_cluster}} gives when rendering for one node of a
// cluster: it prints as nothing (the node runs the statement itself), but
// {{if on_cluster}} still holds, because the statements inside such a block
// (the ALTERs of the Distributed tables) exist only on a cluster. A struct
// is true in a template's if; an empty string would not be.
type onNode struct{}

func (onNode) String() string { return "" }

// Render expands a migration template for cfg and splits it into statements
// (a semicolon at the end of a line ends one). The template functions make
// one file serve both a single server and a cluster:
//
//	{{table "pages"}}        the table that holds the rows: db.pages, or db.pages_local on a cluster
//	{{global "pages"}}       the table to read and insert through: db.pages (Distributed on a cluster)
//	{{view "name"}}          a (materialized) view next to the local tables: db.name
//	{{database}}             the database's name alone (a dictionary's SOURCE names it)
//	{{on_cluster}}           "" or " ON CLUSTER 'name'"; {{if on_cluster}} holds on a cluster
//	{{engine "ReplacingMergeTree" "received_at"}}
//	                         the engine, Replicated* on a cluster, with its version column
//	{{distributed "pages" "cityHash64(crawl_id, url)"}}
//	                         on a cluster, the Distributed table over the local one, sharded by the key
//	{{system "tables"}}      a system table as a directive's query sees it: system.tables, or on a
//	                         cluster migrated ON CLUSTER, that table of every node (clusterAllReplicas)
//
// A statement may start with directives, comment lines the migrator reads
// (see runStatement):
//
//	-- if: SELECT ...        run the statement on a node only where this query answers non-zero
//	-- wait: inserts         first wait until every INSERT running at that moment has ended
func Render(cfg archive.Config, name, text string) ([]string, error) {
	return renderMigration(cfg, clusterDDL, name, text)
}

func renderMigration(cfg archive.Config, mode renderMode, name, text string) ([]string, error) {
	return renderWith(cfg, mode, name, text, nil)
}

// renderWith renders text as renderMigration does, with data as the
// template's dot (config/retention.sql reads its settings from it).
func renderWith(cfg archive.Config, mode renderMode, name, text string, data any) ([]string, error) {
	db := cfg.Database
	cluster := cfg.Cluster
	local := func(t string) string {
		if cluster != "" {
			return t + "_local"
		}
		return t
	}
	onCluster := func() any {
		switch {
		case cluster == "":
			return ""
		case mode.perNode:
			return onNode{}
		}
		return " ON CLUSTER '" + cluster + "'"
	}
	funcs := template.FuncMap{
		"table":      func(t string) string { return db + "." + local(t) },
		"global":     func(t string) string { return db + "." + t },
		"view":       func(t string) string { return db + "." + t },
		"database":   func() string { return db },
		"on_cluster": onCluster,
		"engine": func(kind, version string) string {
			var args []string
			if cluster != "" && mode.replicated {
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
		"system": func(t string) string { return systemTable(cluster, mode, t) },
		"distributed": func(t, shardingKey string) string {
			if cluster == "" {
				return ""
			}
			return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s AS %s.%s\nENGINE = Distributed('%s', '%s', '%s', %s);",
				db, t, onCluster(), db, local(t), cluster, db, local(t), shardingKey)
		},
	}
	tpl, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("migration %s: %w", name, err)
	}
	var b strings.Builder
	if err := tpl.Execute(&b, data); err != nil {
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
// order, every migration not yet recorded there, and records it. It returns
// the names of the migrations it applied.
//
// A migration is recorded only once all its statements have run, and a
// migration stopped midway (a sink killed, ClickHouse restarted) runs again
// from its first statement: every file is written so that it resumes from any
// point (see config.Migrations; TestMigrationsResumeAfterEveryStatement runs
// each one stopped after each statement). One migrator at a time runs DDL on
// a database: the others wait for its lock (migrationLock), then find the
// migrations recorded.
//
// When every migration is already recorded it runs no DDL at all: on a
// cluster even an idempotent CREATE ... ON CLUSTER waits for every node, so a
// sink restarting while a shard is down would wait on DDL it does not need.
func Migrate(ctx context.Context, conn driver.Conn, cfg archive.Config, log zerolog.Logger) ([]string, error) {
	migrations, err := Migrations(cfg)
	if err != nil {
		return nil, err
	}
	return migrate(ctx, []driver.Conn{conn}, cfg, clusterDDL, migrations, log)
}

// MigrateNodes applies the migrations to the nodes of cfg.Cluster as ON
// CLUSTER DDL would, where it cannot run (no Keeper): each statement of
// NodeMigrations on every node in turn before the next (a Distributed table
// read by a later statement needs the local table on every shard), except
// INSERTs, which go once, through the first node, as from a sink. Every
// node's schema_migrations records what was applied, so that a sink started
// on any node finds the schema up to date and runs no ON CLUSTER DDL.
func MigrateNodes(ctx context.Context, nodes []driver.Conn, cfg archive.Config, o NodeOptions, log zerolog.Logger) ([]string, error) {
	if len(nodes) == 0 {
		return nil, errors.New("migrate nodes: no node to migrate")
	}
	migrations, err := NodeMigrations(cfg, o)
	if err != nil {
		return nil, err
	}
	return migrate(ctx, nodes, cfg, renderMode{perNode: true, replicated: o.Replicated}, migrations, log)
}

// migrate applies to nodes the migrations some node lacks, under the
// migration lock, and returns the names of those it applied. Every node's
// version is checked first: a server that cannot run every migration is
// refused before the first statement, never left half migrated.
func migrate(ctx context.Context, nodes []driver.Conn, cfg archive.Config, mode renderMode, migrations []Migration, log zerolog.Logger) ([]string, error) {
	for _, conn := range nodes {
		if err := archive.CheckServerVersion(ctx, conn); err != nil {
			return nil, err
		}
	}
	applied := make([]map[uint32]string, len(nodes))
	upToDate := true
	for i, conn := range nodes {
		a, err := appliedMigrations(ctx, conn, cfg)
		for _, m := range migrations {
			if _, ok := a[m.Version]; err != nil || !ok {
				upToDate = false
			}
		}
		applied[i] = a
	}
	if upToDate {
		warnChanged(migrations, applied[0], log)
		return nil, nil
	}
	lock, err := lockMigrations(ctx, nodes[0], cfg, log)
	if err != nil {
		return nil, err
	}
	defer lock.release()
	if err := createMigrationsTable(ctx, nodes, cfg, mode); err != nil {
		return nil, err
	}
	// Read again under the lock: a migrator that held it before may have
	// applied what was pending.
	for i, conn := range nodes {
		a, err := appliedMigrations(ctx, conn, cfg)
		if err != nil {
			return nil, err
		}
		applied[i] = a
	}
	warnChanged(migrations, applied[0], log)
	var done []string
	for _, m := range migrations {
		var pending []driver.Conn
		for i, conn := range nodes {
			if _, ok := applied[i][m.Version]; !ok {
				pending = append(pending, conn)
			}
		}
		if len(pending) == 0 {
			continue
		}
		log.Info().Str("migration", m.Name).Int("statements", len(m.Statements)).Msg("applying migration")
		began := time.Now()
		if err := applyMigration(ctx, pending, cfg, mode, m, lock); err != nil {
			return done, err
		}
		log.Info().Str("migration", m.Name).Dur("took_ms", time.Since(began)).Msg("migration applied")
		done = append(done, m.Name)
	}
	return done, nil
}

// createMigrationsTable creates, on every node, the database and the table
// that records applied migrations, if they do not exist yet.
func createMigrationsTable(ctx context.Context, nodes []driver.Conn, cfg archive.Config, mode renderMode) error {
	onCluster := ""
	if cfg.Cluster != "" && !mode.perNode {
		onCluster = " ON CLUSTER '" + cfg.Cluster + "'"
	}
	setup, err := renderMigration(cfg, mode, "schema_migrations", `
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
		return err
	}
	for _, stmt := range setup {
		for _, conn := range nodes {
			if err := conn.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("prepare migrations: %w", err)
			}
		}
	}
	return nil
}

// applyMigration runs m's statements on the nodes that lack it (pending;
// per node, an INSERT on the first only), checking before each that lock
// is still held, then records m as applied on each of them.
func applyMigration(ctx context.Context, pending []driver.Conn, cfg archive.Config, mode renderMode, m Migration, lock *migrationLock) error {
	for i, stmt := range m.Statements {
		targets := pending
		if mode.perNode && isInsert(stmt) {
			targets = pending[:1]
		}
		for _, conn := range targets {
			if err := lock.check(); err != nil {
				return fmt.Errorf("migration %s, statement %d: %w", m.Name, i+1, err)
			}
			if err := runStatement(ctx, conn, cfg, mode, stmt); err != nil {
				return fmt.Errorf("migration %s, statement %d: %w", m.Name, i+1, err)
			}
		}
	}
	for _, conn := range pending {
		if err := conn.Exec(ctx, "INSERT INTO "+cfg.Database+".schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
			m.Version, m.Name, m.Checksum, time.Now().UTC()); err != nil {
			return fmt.Errorf("record migration %s: %w", m.Name, err)
		}
	}
	return nil
}

// runStatement runs one statement of a migration on conn, as its
// directives say. Most statements need none: IF [NOT] EXISTS makes them safe
// to repeat. A statement that is not, such as EXCHANGE TABLES, names with
// "-- if:" the state it applies to, so that a migration interrupted and run
// again skips it where it already took effect. "-- wait: inserts" lets every
// INSERT already running end first: an INSERT holds the table it named when it
// began, so after an EXCHANGE an INSERT begun before it still writes to the
// old table, and the rows it adds must be there before they are moved.
func runStatement(ctx context.Context, conn driver.Conn, cfg archive.Config, mode renderMode, stmt string) error {
	for line := range strings.SplitSeq(stmt, "\n") {
		l := strings.TrimSpace(line)
		if l == "" {
			continue
		}
		if !strings.HasPrefix(l, "--") {
			break
		}
		directive, arg, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(l, "--")), ":")
		arg = strings.TrimSpace(arg)
		switch directive {
		case "if":
			var yes uint64
			if err := conn.QueryRow(ctx, "SELECT toUInt64(("+arg+"))").Scan(&yes); err != nil {
				return fmt.Errorf("condition %q: %w", arg, err)
			}
			if yes == 0 {
				return nil
			}
		case "wait":
			if arg != "inserts" {
				return fmt.Errorf("directive %q: only \"wait: inserts\" is known", l)
			}
			if err := waitInserts(ctx, conn, cfg, mode); err != nil {
				return err
			}
		}
	}
	return conn.Exec(ctx, stmt)
}

// systemTable names the system table t as a directive's query reads it: on
// a cluster migrated ON CLUSTER, through one node, that table of every node.
func systemTable(cluster string, mode renderMode, t string) string {
	if cluster != "" && !mode.perNode {
		return "clusterAllReplicas('" + cluster + "', system." + t + ")"
	}
	return "system." + t
}

// insertsWaitLimit bounds how long waitInserts waits for the INSERTs it saw.
const insertsWaitLimit = 10 * time.Minute

// waitInserts returns when every INSERT running when it was called has
// ended: on the node of conn, or on every node of the cluster when the
// migration runs ON CLUSTER. Query ids, not clocks, say which ones.
func waitInserts(ctx context.Context, conn driver.Conn, cfg archive.Config, mode renderMode) error {
	processes := systemTable(cfg.Cluster, mode, "processes")
	var running []string
	if err := conn.QueryRow(ctx, "SELECT groupArray(query_id) FROM "+processes+" WHERE query_kind = 'Insert'").Scan(&running); err != nil {
		return fmt.Errorf("wait for running inserts: %w", err)
	}
	if len(running) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, insertsWaitLimit)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var left uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+processes+" WHERE query_id IN ?", running).Scan(&left); err != nil {
			return fmt.Errorf("wait for %d running inserts: %w", len(running), err)
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for running inserts: %d still running: %w", left, ctx.Err())
		case <-tick.C:
		}
	}
}

// amended lists, per migration file, the checksums of the released texts
// it replaced: a guard added so that the file resumes after a stop midway,
// the statements and the schema they make unchanged. An archive that applied
// the earlier text is up to date and is not warned about.
var amended = map[string][]string{
	"0008_document_once.sql": {"101d98388d95ae0f"},
	"0009_content_once.sql":  {"9f9663f7b7e19797"},
}

// warnChanged logs each applied migration whose file changed since.
func warnChanged(migrations []Migration, applied map[uint32]string, log zerolog.Logger) {
	for _, m := range migrations {
		if sum, ok := applied[m.Version]; ok && sum != m.Checksum && !slices.Contains(amended[m.Name], sum) {
			log.Warn().Str("migration", m.Name).Msg("migration file changed after it was applied; a schema change needs a new file")
		}
	}
}

func isInsert(stmt string) bool {
	for line := range strings.SplitSeq(stmt, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
			return strings.HasPrefix(strings.ToUpper(l), "INSERT")
		}
	}
	return false
}

func appliedMigrations(ctx context.Context, conn driver.Conn, cfg archive.Config) (map[uint32]string, error) {
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
