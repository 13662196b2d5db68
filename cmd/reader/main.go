// Command reader is the read API of the crawl archive: search, pages and
// their history, jobs, the changes feed and exports, read-only, from
// ClickHouse. Configuration: environment; see --help and
// config/environment.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/readercmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := readercmd.Run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "reader:", err)
		stop()
		os.Exit(env.ExitCode(err))
	}
}
