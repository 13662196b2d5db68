package sinkcmd

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/rs/zerolog"
)

// runMigrate is `sink migrate`: the schema migrations not yet applied and
// the retention (RETENTION_*) if it changed, then exit.
func runMigrate(ctx context.Context, cfg Config, stdout io.Writer, log zerolog.Logger) error {
	conn, err := archive.Open(cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	defer conn.Close()
	applied, err := schema.Migrate(ctx, conn, cfg.ArchiveConfig, log)
	if err != nil {
		return err
	}
	if changed, err := schema.ApplyRetention(ctx, conn, cfg.ArchiveConfig, cfg.RetentionConfig, log); err != nil {
		return err
	} else if changed {
		fmt.Fprintf(stdout, "retention of %s set: %s\n", cfg.Database, cfg.RetentionConfig)
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "schema of %s is up to date\n", cfg.Database)
		return nil
	}
	fmt.Fprintf(stdout, "applied %d migration(s) to %s: %s\n", len(applied), cfg.Database, strings.Join(applied, ", "))
	return nil
}
