// Package sink is the crawlhouse sink: it consumes the deliveries
// the receiver stored in JetStream, archives them in ClickHouse in batches,
// dead-letters what ClickHouse will not take, raises alerts on failing
// crawls, and runs the backfill. Run is the whole binary; cmd/sink only
// calls it.
package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/alert"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/probe"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/version"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Options are optional hooks of RunWithOptions.
type Options struct {
	// Ready, when set, is called with the bound address of SINK_LISTEN
	// once the sink serves it (SINK_LISTEN=127.0.0.1:0 picks a port).
	Ready func(addr string)
	// NewBackfiller builds the backfill; nil means the real one
	// (internal/backfill). The backfill runs only while CRAWL_API_URL is
	// set.
	NewBackfiller NewBackfiller
	// AckWait overrides the consumer's ack wait (tests that kill a sink
	// want its messages back sooner than 30 s).
	AckWait time.Duration
	// CrashAfterInsert, when set, is called after each batch insert and
	// before the acks; true abandons the batch as a crash would (tests).
	CrashAfterInsert func() bool
	// ClickHouseSettings are set on every query of the sink's ClickHouse
	// connection (tests: a low max_memory_usage).
	ClickHouseSettings map[string]any
}

// Run is the sink binary: `sink` (migrate, then consume until ctx is done),
// `sink migrate`, `sink backfill <crawl-id>`, `sink redrive`, each with
// --help, and `sink --version`. Configuration comes through getenv; logs
// and command output go to stdout. A returned error is one line for the
// user: main prints it to stderr and exits 1.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return RunWithOptions(ctx, args, getenv, stdout, stderr, Options{})
}

// RunWithOptions is Run with hooks.
func RunWithOptions(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer, opts Options) (err error) {
	// Credentials are scrubbed from the logs and the returned error,
	// whichever path carried them there (see logs.Scrubber).
	scrub := logs.NewScrubber(logs.Secrets(getenv))
	stdout = scrub.Writer(stdout)
	defer func() { err = scrub.Error(err) }()
	// "probe URL" is the container healthcheck: no configuration needed.
	if len(args) > 1 && args[1] == "probe" {
		return probe.Run(ctx, args[2:])
	}
	if opts.NewBackfiller == nil {
		opts.NewBackfiller = newBackfiller
	}
	cmd, rest, help, err := parseArgs(args)
	if err != nil {
		return err
	}
	if help {
		usage(stdout, cmd)
		return nil
	}
	if cmd == "version" {
		fmt.Fprintln(stdout, "sink", version.String())
		return nil
	}
	cfg, err := Load(getenv)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	log := logs.New(cfg.LogConfig, stdout, "sink")
	switch cmd {
	case "migrate":
		return runMigrate(ctx, cfg, stdout, log)
	case "redrive":
		return runRedrive(ctx, cfg, stdout, log)
	case "backfill":
		return runBackfill(ctx, cfg, rest[0], stdout, log, opts)
	}
	return serve(ctx, cfg, log, opts)
}

var commands = map[string]string{
	"":         "consume deliveries from JetStream into ClickHouse (applies migrations first)",
	"migrate":  "apply the ClickHouse schema migrations and exit",
	"backfill": "reconcile one crawl against the crawl API now: backfill <crawl-id>",
	"redrive":  "move every dead letter back to the events stream for another try",
	"probe":    "GET a URL and exit 0 on a 2xx answer (container healthcheck): probe <url>",
}

func parseArgs(args []string) (cmd string, rest []string, help bool, err error) {
	if len(args) > 0 {
		args = args[1:]
	}
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help", "help":
			help = true
		case "-version", "--version", "version":
			if cmd == "" {
				cmd = "version"
			}
		default:
			if strings.HasPrefix(a, "-") {
				return "", nil, false, fmt.Errorf("unknown flag %q (try --help)", a)
			}
			if cmd == "" {
				if _, ok := commands[a]; !ok {
					return "", nil, false, fmt.Errorf("unknown command %q (try --help)", a)
				}
				cmd = a
				continue
			}
			rest = append(rest, a)
		}
	}
	if help {
		return cmd, rest, true, nil
	}
	switch {
	case cmd == "backfill" && len(rest) != 1:
		return "", nil, false, errors.New("usage: sink backfill <crawl-id>")
	case cmd != "backfill" && len(rest) > 0:
		return "", nil, false, fmt.Errorf("unexpected argument %q (try --help)", rest[0])
	}
	return cmd, rest, false, nil
}

func usage(w io.Writer, cmd string) {
	switch cmd {
	case "migrate":
		fmt.Fprint(w, "Usage: sink migrate\n\nApplies the embedded ClickHouse schema migrations not yet recorded in\n<CLICKHOUSE_DATABASE>.schema_migrations, prints their names, and exits.\n")
	case "backfill":
		fmt.Fprint(w, "Usage: sink backfill <crawl-id>\n\nReads every page of the crawl from GET $CRAWL_API_URL/v2/crawl/<crawl-id>,\narchives the pages not yet in ClickHouse (origin backfill), and prints pages\nfetched / inserted / already present.\n")
	case "redrive":
		fmt.Fprint(w, "Usage: sink redrive\n\nMoves every message of the dead-letter stream ($SINK_DLQ_STREAM) back to the\nevents stream, to its original subject, for another try, and prints how many.\n")
	default:
		fmt.Fprint(w, `sink: archives crawl deliveries from JetStream into ClickHouse.

Usage:
  sink                      `+commands[""]+`
  sink migrate              `+commands["migrate"]+`
  sink backfill <crawl-id>  `+commands["backfill"]+`
  sink redrive              `+commands["redrive"]+`
  sink <command> --help     help on a command
  sink --version

Configured by the environment:

`)
		writeEnv(w)
		fmt.Fprint(w, "\nEndpoints on SINK_LISTEN: GET /healthz, GET /readyz, GET /metrics.\n")
	}
}

func runMigrate(ctx context.Context, cfg Config, stdout io.Writer, log zerolog.Logger) error {
	conn, err := archive.Open(cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	defer conn.Close()
	applied, err := archive.Migrate(ctx, conn, cfg.ArchiveConfig, log)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "schema of %s is up to date\n", cfg.Database)
		return nil
	}
	fmt.Fprintf(stdout, "applied %d migration(s) to %s: %s\n", len(applied), cfg.Database, strings.Join(applied, ", "))
	return nil
}

func runRedrive(ctx context.Context, cfg Config, stdout io.Writer, log zerolog.Logger) error {
	nc, js, err := stream.Connect(cfg.StreamConfig, "crawlhouse-sink-redrive", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	n, err := Redrive(ctx, js, cfg)
	fmt.Fprintf(stdout, "redriven %d dead letter(s) from %s to %s\n", n, cfg.DLQStream, cfg.StreamConfig.Stream)
	return err
}

func runBackfill(ctx context.Context, cfg Config, crawlID string, stdout io.Writer, log zerolog.Logger, opts Options) error {
	if cfg.CrawlAPIURL == "" {
		return errors.New("sink backfill: CRAWL_API_URL is not set")
	}
	conn, err := archive.Open(cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := archive.Migrate(ctx, conn, cfg.ArchiveConfig, log); err != nil {
		return err
	}
	w, err := archive.NewWriter(conn, cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	// A one-off run serves no /metrics: its counters go to a registry of
	// their own and are dropped.
	b, err := opts.NewBackfiller(cfg, w, prometheus.NewRegistry(), log)
	if err != nil {
		return err
	}
	res, err := b.Backfill(ctx, crawlID)
	fmt.Fprintf(stdout, "crawl %s: pages fetched %d, inserted %d, already present %d; backfill %s\n",
		crawlID, res.Fetched, res.Inserted, res.Present, res.State)
	return err
}

// serve is `sink`: it serves the endpoints at once, then, retrying until
// the dependencies answer, migrates the schema, ensures the streams and the
// consumer, and consumes until ctx is done.
func serve(ctx context.Context, cfg Config, log zerolog.Logger, opts Options) error {
	conn, err := archive.OpenWithSettings(cfg.ArchiveConfig, opts.ClickHouseSettings)
	if err != nil {
		return err
	}
	defer conn.Close()
	w, err := archive.NewWriter(conn, cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	nc, js, err := stream.Connect(cfg.StreamConfig, "crawlhouse-sink", log)
	if err != nil {
		return err
	}
	defer nc.Close()

	// Alert claims live in a JetStream KV bucket, created with the streams
	// in the start-up retry below; until then a check fails and is retried.
	claims := &startedClaims{}
	alerter, err := alert.New(cfg.AlertConfig, w, claims, nc, nil, log)
	if err != nil {
		return err
	}
	st := newStall(nil)
	m := newMetrics(alerter.Raised, st)

	// The backfiller is built inside the start-up retry below: it creates
	// its JetStream KV bucket, which fails while NATS or a cluster's meta
	// leader is away, and that must delay the sink, not end it. Its metrics
	// appear on /metrics once it exists.
	var backfiller Backfiller
	wantBackfill := opts.NewBackfiller != nil && cfg.CrawlAPIURL != ""
	if cfg.CrawlAPIURL == "" {
		log.Info().Msg("CRAWL_API_URL is not set: backfill is off")
	}

	// A stalled consumer is not ready even while both dependencies answer
	// (a page ClickHouse will not take, a revoked grant): nothing is being
	// archived, and the answer says why.
	ready := func(ctx context.Context) map[string]error {
		return map[string]error{
			"jetstream":  stream.Ready(ctx, js, cfg.StreamConfig),
			"clickhouse": w.Ping(ctx),
			"consumer":   st.err(),
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	hs := &http.Server{Handler: routes(m, ready), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	log.Info().Str("addr", ln.Addr().String()).Str("version", version.String()).Msg("listening")
	if opts.Ready != nil {
		opts.Ready(ln.Addr().String())
	}

	var cons jetstream.Consumer
	ackWait := defaultAckWait
	if opts.AckWait > 0 {
		ackWait = opts.AckWait
	}
	err = retry(ctx, log, "start-up", func() error {
		if _, err := archive.Migrate(ctx, conn, cfg.ArchiveConfig, log); err != nil {
			return fmt.Errorf("migrate ClickHouse: %w", err)
		}
		if _, err := stream.EnsureStream(ctx, js, cfg.StreamConfig); err != nil {
			return err
		}
		dl, err := delivery.NewDeadLetters(js, deadLetterConfig(cfg))
		if err != nil {
			return err
		}
		if err := dl.Ensure(ctx); err != nil {
			return err
		}
		c, err := js.CreateOrUpdateConsumer(ctx, cfg.StreamConfig.Stream, ConsumerConfig(cfg, ackWait))
		if err != nil {
			return fmt.Errorf("create or update consumer %s: %w", cfg.Consumer, err)
		}
		cons = c
		if claims.kv.Load() == nil {
			kv, err := alert.NewKVClaims(ctx, js, cfg.AlertConfig.Window, cfg.StreamConfig.Replicas)
			if err != nil {
				return err
			}
			claims.kv.Store(kv)
		}
		if wantBackfill && backfiller == nil {
			b, err := opts.NewBackfiller(cfg, w, m.registry, log)
			if err != nil {
				return err
			}
			backfiller = b
		}
		return nil
	})
	if err != nil {
		return nil // ctx done during start-up
	}

	var observer Observer
	if backfiller != nil {
		observer = backfiller
	}
	c, err := newConsumer(cfg, js, w, alerter, observer, m, st, log, ackWait)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	wg.Add(1)
	go func() { defer wg.Done(); alerter.Run(bgCtx) }()
	if backfiller != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := backfiller.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error().Err(err).Msg("backfill stopped")
			}
		}()
	}
	c.crashAfterInsert = opts.CrashAfterInsert
	log.Info().Str("consumer", cfg.Consumer).Str("stream", cfg.StreamConfig.Stream).Int("batch_size", cfg.BatchSize).Msg("consuming")
	done := make(chan error, 1)
	go func() { done <- c.run(ctx, cons) }()

	select {
	case err = <-served:
		err = fmt.Errorf("serve: %w", err)
		<-done
	case err = <-done:
	}
	// Graceful shutdown: the consumer finished its batch; send the queued
	// alerts, let the backfill stop, then close (deferred) the HTTP server,
	// NATS and ClickHouse.
	log.Info().Msg("shutting down")
	stopBg()
	wg.Wait()
	_ = nc.Drain()
	return err
}

// retry runs f until it succeeds or ctx is done, backing off to 30 s.
func retry(ctx context.Context, log zerolog.Logger, what string, f func() error) error {
	delay := 500 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		log.Warn().Err(err).Dur("retry_in", delay).Msg(what + " failed; retrying")
		sleep(ctx, delay)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		delay = min(delay*2, 30*time.Second)
	}
}

// startedClaims is the alert claim store once start-up created it.
type startedClaims struct {
	kv atomic.Pointer[alert.KVClaims]
}

func (c *startedClaims) Claim(ctx context.Context, crawlID string) (bool, error) {
	kv := c.kv.Load()
	if kv == nil {
		return false, errors.New("alert claims bucket not created yet")
	}
	return kv.Claim(ctx, crawlID)
}
