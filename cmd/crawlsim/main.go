// Command crawlsim simulates the crawl API: it serves GET /v2/crawl/{id} and
// sends a crawl's signed webhook deliveries to a URL, with faults. Run
// "crawlsim -help" for the flags.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := crawlsim.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "crawlsim:", err)
		os.Exit(env.ExitCode(err))
	}
}
