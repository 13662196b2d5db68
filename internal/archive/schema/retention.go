package schema

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/config"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/rs/zerolog"
)

// maxRetentionDays bounds every age limit (a hundred years): ClickHouse's
// DateTime ends in 2106, and a larger INTERVAL would overflow it.
const maxRetentionDays = 36500

// Retention is how long the archive keeps what it stores
// (config/environment.md, RETENTION_*). ClickHouse enforces it with table
// TTLs (config/retention.sql); 0 days keeps rows for ever.
type Retention struct {
	// PageDays is the age after which a page version goes, unless it is one
	// of the KeepVersions newest versions of its URL.
	PageDays int `envconfig:"RETENTION_PAGE_DAYS" default:"0" desc:"days a page version is kept (0: for ever); the newest RETENTION_KEEP_VERSIONS of each URL stay"`
	// KeepVersions is how many of each URL's newest versions stay whatever
	// their age: at least two, the latest and the previous one, which change
	// tracking compares.
	KeepVersions int `envconfig:"RETENTION_KEEP_VERSIONS" default:"2" desc:"newest versions of each URL kept whatever their age (at least 2)"`
	// FailureDays is the age after which a failure row goes.
	FailureDays int `envconfig:"RETENTION_FAILURE_DAYS" default:"180" desc:"days a failure is kept (0: for ever)"`
	// EventDays is the age after which a raw event (the events table) goes.
	EventDays int `envconfig:"RETENTION_EVENT_DAYS" default:"0" desc:"days a raw event is kept (0: for ever)"`
}

// Validate reports each setting out of range, naming its variable.
func (r Retention) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		days int
	}{{"RETENTION_PAGE_DAYS", r.PageDays}, {"RETENTION_FAILURE_DAYS", r.FailureDays}, {"RETENTION_EVENT_DAYS", r.EventDays}} {
		if d.days < 0 || d.days > maxRetentionDays {
			errs = append(errs, fmt.Errorf("%s: %d is not between 0 (for ever) and %d", d.name, d.days, maxRetentionDays))
		}
	}
	if r.KeepVersions < 2 || r.KeepVersions > 1000 {
		errs = append(errs, fmt.Errorf("RETENTION_KEEP_VERSIONS: %d is not between 2 (the latest version and the previous one, which change tracking compares) and 1000", r.KeepVersions))
	}
	return errors.Join(errs...)
}

// String says the retention in words, for the log and retention_settings.
func (r Retention) String() string {
	days := func(d int) string {
		if d == 0 {
			return "for ever"
		}
		return fmt.Sprintf("%d days", d)
	}
	return fmt.Sprintf("pages %s (newest %d versions of each URL kept), failures %s, events %s",
		days(r.PageDays), r.KeepVersions, days(r.FailureDays), days(r.EventDays))
}

func retentionStatements(cfg archive.Config, mode renderMode, r Retention) ([]string, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return renderWith(cfg, mode, "retention.sql", config.Retention, r)
}

// ApplyRetention sets the archive's TTLs to r, after the migrations. It runs
// the statements only when they differ from the ones last applied (on a
// cluster each is ON CLUSTER DDL, which waits for every node), under the
// migration lock, and records them once all ran: a sink stopped midway runs
// them all again at its next start. It reports whether it ran them.
func ApplyRetention(ctx context.Context, conn driver.Conn, cfg archive.Config, r Retention, log zerolog.Logger) (bool, error) {
	return applyRetention(ctx, []driver.Conn{conn}, cfg, clusterDDL, r, log)
}

// ApplyRetentionNodes is ApplyRetention for a cluster migrated node by node
// (MigrateNodes): each statement on every node in turn, recorded on each.
func ApplyRetentionNodes(ctx context.Context, nodes []driver.Conn, cfg archive.Config, o NodeOptions, r Retention, log zerolog.Logger) (bool, error) {
	if len(nodes) == 0 || cfg.Cluster == "" {
		return false, errors.New("apply retention to nodes: needs nodes and CLICKHOUSE_CLUSTER")
	}
	return applyRetention(ctx, nodes, cfg, renderMode{perNode: true, replicated: o.Replicated}, r, log)
}

func applyRetention(ctx context.Context, nodes []driver.Conn, cfg archive.Config, mode renderMode, r Retention, log zerolog.Logger) (bool, error) {
	stmts, err := retentionStatements(cfg, mode, r)
	if err != nil {
		return false, err
	}
	digest := retentionDigest(cfg, r)
	upToDate := func() (bool, error) {
		for _, conn := range nodes {
			last, err := lastRetention(ctx, conn, cfg)
			if err != nil || last != digest {
				return false, err
			}
		}
		return true, nil
	}
	if ok, err := upToDate(); err == nil && ok {
		return false, nil
	}
	lock, err := lockMigrations(ctx, nodes[0], cfg, log)
	if err != nil {
		return false, err
	}
	defer lock.release()
	if ok, err := upToDate(); err != nil || ok {
		return false, err
	}
	for i, stmt := range stmts {
		for _, conn := range nodes {
			if err := lock.check(); err != nil {
				return false, fmt.Errorf("retention, statement %d: %w", i+1, err)
			}
			if err := runStatement(ctx, conn, cfg, mode, stmt); err != nil {
				return false, fmt.Errorf("retention, statement %d: %w", i+1, err)
			}
		}
	}
	for _, conn := range nodes {
		if err := conn.Exec(ctx, "INSERT INTO "+cfg.Database+".retention_settings (digest, settings, applied_at) VALUES (?, ?, ?)",
			digest, r.String(), time.Now().UTC()); err != nil {
			return false, fmt.Errorf("record the retention applied: %w", err)
		}
	}
	log.Info().Str("retention", r.String()).Msg("retention applied")
	return true, nil
}

// retentionDigest identifies a retention as applied: the settings, the
// database and cluster, and the text of config/retention.sql. Not the
// rendered statements: a cluster migrated node by node (ApplyRetentionNodes)
// and a sink applying ON CLUSTER record the same digest for the same
// retention, so that the sink finds it applied and runs no DDL.
func retentionDigest(cfg archive.Config, r Retention) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d %d %d %d\x00%s", cfg.Database, cfg.Cluster,
		r.PageDays, r.KeepVersions, r.FailureDays, r.EventDays, config.Retention))
	return hex.EncodeToString(sum[:8])
}

// lastRetention is the digest of the retention statements applied last, ""
// if none were.
func lastRetention(ctx context.Context, conn driver.Conn, cfg archive.Config) (string, error) {
	var digest string
	err := conn.QueryRow(ctx, "SELECT argMax(digest, applied_at) FROM "+cfg.Database+".retention_settings").Scan(&digest)
	if err != nil {
		return "", fmt.Errorf("read the retention applied: %w", err)
	}
	return digest, nil
}
