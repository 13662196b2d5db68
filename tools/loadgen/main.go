// Command loadgen is the receiver's benchmark: it starts a receiver with an
// embedded JetStream in this process, posts signed ~5 KB crawl.page
// deliveries to it over loopback HTTP for a bounded time, and measures, in
// the same run and against the same server, the ceiling: raw JetStream async
// publishes of the same payloads. See docs/benchmarks.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		stop()
		os.Exit(1)
	}
}
