package receivercmd

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"github.com/crawlhouse/crawlhouse/internal/stream"
)

// redriveRejected is `receiver redrive-rejected [--since D]`: it runs
// receiver.Redrive over the quarantine with the current configuration and
// prints what it did, and each reason what stays is still refused for. It
// connects to NATS_URL as a client, also with NATS_EMBEDDED=true (the
// running receiver's server).
func redriveRejected(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var since time.Time
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--since" && i+1 < len(args):
			i++
			t, err := parseSince(args[i], time.Now())
			if err != nil {
				return env.Usage(err)
			}
			since = t
		case a == "-h" || a == "--help":
			fmt.Fprintln(stdout, "Usage: receiver redrive-rejected [--since 24h|2026-01-02T15:04:05Z]\n\nRe-examines the refused deliveries kept in the quarantine with the current WEBHOOK_SECRETS and\nvalidation; publishes what now passes into the events stream (once: Nats-Msg-Id = webhookId)\nand removes it from the quarantine. The rest stays with its reason.")
			return nil
		default:
			return env.Usagef("redrive-rejected: unknown argument %q (try --help)", a)
		}
	}
	cfg, err := env.Checked(Load, getenv)
	if err != nil {
		return err
	}
	log := logs.New(cfg.LogConfig, io.Discard, "receiver")
	nc, js, err := stream.Connect(cfg.StreamConfig, "crawlhouse-redrive-rejected", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	if _, err := stream.EnsureStream(ctx, js, cfg.StreamConfig); err != nil {
		return err
	}
	pub := stream.NewPublisher(nc, js, cfg.StreamConfig, stream.PublisherOptions{})
	defer pub.Close()
	r, err := receiver.Redrive(ctx, cfg.Config, js, pub, since)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "examined %d, archived %d (of which %d already stored), still refused %d\n",
		r.Examined, r.Published, r.Duplicates, r.Refused)
	reasons := make([]string, 0, len(r.Still))
	for k := range r.Still {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	for _, k := range reasons {
		fmt.Fprintf(stdout, "  still refused %d: %s\n", r.Still[k], k)
	}
	return nil
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("redrive-rejected: --since %q is neither a duration (24h) nor an RFC 3339 time", v)
}
