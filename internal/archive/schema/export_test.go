package schema

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/rs/zerolog"
)

// MigrateOnly applies ms (a prefix of Migrations) as Migrate applies all of
// them: a database at an earlier version, for the tests.
func MigrateOnly(ctx context.Context, conn driver.Conn, cfg archive.Config, ms []Migration) ([]string, error) {
	return migrate(ctx, []driver.Conn{conn}, cfg, clusterDDL, ms, zerolog.Nop())
}

// RunStatement runs one statement of a migration as the migrator does,
// directives included: what a migrator stopped after it had done.
func RunStatement(ctx context.Context, conn driver.Conn, cfg archive.Config, stmt string) error {
	return runStatement(ctx, conn, cfg, clusterDDL, stmt)
}

// LockMigrations takes the migration lock of cfg.Database, as a migrator
// does before it runs DDL; release lets it go.
func LockMigrations(ctx context.Context, conn driver.Conn, cfg archive.Config) (release func(), err error) {
	l, err := lockMigrations(ctx, conn, cfg, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	return l.release, nil
}

// RetentionStatements renders config/retention.sql for cfg and r, as ON
// CLUSTER DDL on a cluster.
func RetentionStatements(cfg archive.Config, r Retention) ([]string, error) {
	return retentionStatements(cfg, clusterDDL, r)
}
