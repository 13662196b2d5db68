// Command soak runs crawlhouse as operators do — receiver and sink as their
// own processes, a real JetStream (embedded in the receiver, or a
// three-node cluster), a real ClickHouse — drives simulated crawls with a
// fault mix through it while components are killed and restarted, and then
// accounts for every page: what crawlsim sent against what ClickHouse holds.
//
// `make soak` runs it for minutes (scripts/soak.sh); a short run is part of
// `make test` (TestSoakShort, TestSoakCluster).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// run is the soak command: flags to Options, a run, and an error when any
// check differs (the tables are printed either way).
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(out)
	o := Options{Out: out}
	fs.StringVar(&o.BinDir, "bin", "bin", "directory with the receiver and sink binaries")
	fs.StringVar(&o.WorkDir, "work", "", "state and logs directory (default: a new temporary one)")
	fs.IntVar(&o.Crawls, "crawls", 4, "crawls sent at once")
	fs.IntVar(&o.Pages, "pages", 2000, "pages per crawl")
	fs.IntVar(&o.PageBytes, "page-bytes", 5000, "markdown size of a page")
	fs.Float64Var(&o.Rate, "rate", 500, "deliveries per second over all crawls")
	fs.IntVar(&o.Concurrency, "concurrency", 32, "POSTs in flight per crawl")
	fs.Float64Var(&o.Faults.Duplicates, "duplicates", 0.05, "fraction of pages delivered twice")
	fs.Float64Var(&o.Faults.Drops, "drops", 0.05, "fraction of pages never delivered")
	fs.Float64Var(&o.Faults.Failures, "failures", 0.03, "fraction of pages that failed to scrape")
	fs.Float64Var(&o.Faults.BadSignatures, "bad-signatures", 0.02, "fraction of deliveries badly signed")
	fs.Float64Var(&o.Faults.Oversized, "oversized", 0.005, "fraction of pages of 3 MB")
	fs.IntVar(&o.Receivers, "receivers", 1, "receiver processes")
	fs.IntVar(&o.Sinks, "sinks", 2, "sink processes")
	fs.BoolVar(&o.Cluster, "cluster", false, "three-node JetStream cluster; stop the stream leader mid-run")
	fs.BoolVar(&o.KillSink, "kill-sink", true, "SIGKILL a sink mid-run and restart it")
	fs.BoolVar(&o.RestartClickHouse, "restart-clickhouse", true, "stop ClickHouse mid-run and start it again")
	fs.IntVar(&o.AlertThreshold, "alert-threshold", 5, "sink ALERT_FAILURE_THRESHOLD")
	fs.Float64Var(&o.LatencyRate, "latency-rate", 500, "rate of the steady latency phase")
	fs.DurationVar(&o.LatencyDuration, "latency-duration", 20*time.Second, "length of the steady latency phase (0: none)")
	fs.DurationVar(&o.Settle, "settle", 3*time.Minute, "longest wait for the archive to converge")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the crawls")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "crawlhouse-soak-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.WorkDir = dir
	}
	res, err := runSoak(ctx, o)
	if err != nil {
		return err
	}
	if res.Failed > 0 {
		return fmt.Errorf("%d checks differ", res.Failed)
	}
	return nil
}
