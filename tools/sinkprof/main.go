// Command sinkprof is the sink binary with a CPU profile: `sinkprof
// <profile file> [sink arguments]` runs internal/sinkcmd exactly as cmd/sink
// does, with runtime/pprof sampling the whole process, and writes the
// profile when the sink returns (SIGINT or SIGTERM). It is test tooling for
// the sink benchmark (internal/sink/bench_test.go, docs/benchmarks.md
// "Sink"); nothing in the product imports it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sinkprof <cpu profile file> [sink arguments]")
		os.Exit(2)
	}
	if err := run(os.Args[1], append([]string{"sink"}, os.Args[2:]...)); err != nil {
		fmt.Fprintln(os.Stderr, "sinkprof:", err)
		os.Exit(1)
	}
}

func run(profile string, args []string) error {
	f, err := os.Create(profile)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return sinkcmd.Run(ctx, args, os.Getenv, os.Stdout, os.Stderr)
}
