// Command receiver takes signed crawl.page webhook deliveries and stores
// them in JetStream. Configuration: environment; see --help and
// config/environment.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/receivercmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := receivercmd.Run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		stop()
		os.Exit(env.ExitCode(err))
	}
}
