package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/nats-io/nats.go/jetstream"
)

// redriveRejected is `receiver redrive-rejected [--since D]`: it examines
// every delivery in the quarantine (quarantine.go) with the current
// configuration, as the receiver would now: its kept signatures against
// WEBHOOK_SECRETS (an item authenticated by a shared token or unsigned
// passes only while that is still allowed), then validation. What passes
// both is published into the events stream as the receiver publishes it
// (Nats-Msg-Id = its webhookId, so repeated redrives and the sender's own
// retries collapse) and removed from the quarantine once JetStream
// confirmed it; the rest stays, and its reason now is printed. It connects
// to NATS_URL as a client, also with NATS_EMBEDDED=true (the running
// receiver's server).
func redriveRejected(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var since time.Time
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--since" && i+1 < len(args):
			i++
			t, err := parseSince(args[i], time.Now())
			if err != nil {
				return err
			}
			since = t
		case a == "-h" || a == "--help":
			fmt.Fprintln(stdout, "Usage: receiver redrive-rejected [--since 24h|2026-01-02T15:04:05Z]\n\nRe-examines the refused deliveries kept in the quarantine with the current WEBHOOK_SECRETS and\nvalidation; publishes what now passes into the events stream (once: Nats-Msg-Id = webhookId)\nand removes it from the quarantine. The rest stays with its reason.")
			return nil
		default:
			return fmt.Errorf("redrive-rejected: unknown argument %q (try --help)", a)
		}
	}
	cfg, err := env.Checked(Load, getenv)
	if err != nil {
		return err
	}
	log := logs.New(cfg.LogConfig, io.Discard, "receiver")
	verifier, err := cfg.verifier()
	if err != nil {
		return fmt.Errorf("config: WEBHOOK_SECRETS: %w", err)
	}
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
	r := &redrive{cfg: cfg, verifier: verifier, pub: pub, since: since, still: map[string]int{}}
	for _, class := range classes {
		if err := r.class(ctx, js, class); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "examined %d, archived %d (of which %d already stored), still refused %d\n",
		r.examined, r.published, r.duplicates, r.refused)
	reasons := make([]string, 0, len(r.still))
	for k := range r.still {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	for _, k := range reasons {
		fmt.Fprintf(stdout, "  still refused %d: %s\n", r.still[k], k)
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

// redrive is one run of redrive-rejected.
type redrive struct {
	cfg      Config
	verifier *verify.Verifier
	pub      Publisher
	since    time.Time

	examined, published, duplicates, refused int
	// still counts what stays by "<class>: <reason>".
	still map[string]int
}

// class examines the quarantine stream of class, oldest first.
func (r *redrive) class(ctx context.Context, js jetstream.JetStream, class string) error {
	sc := r.cfg.quarantineStream(class, r.cfg.Replicas)
	st, err := js.Stream(ctx, sc.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("quarantine stream %s: %w", sc.Name, err)
	}
	for seq := uint64(1); ; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(sc.Subjects[0]))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", sc.Name, seq, err)
		}
		seq = m.Sequence + 1
		if m.Time.Before(r.since) {
			continue
		}
		r.examined++
		head, err := r.examine(class, m)
		if err != nil {
			r.refused++
			r.still[class+": "+err.Error()]++
			continue
		}
		at, perr := time.Parse(time.RFC3339Nano, m.Header.Get(headerRejectedAt))
		if perr != nil {
			at = m.Time
		}
		pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
		ack, err := r.pub.Publish(pctx, delivery.NewEnvelope(r.cfg.SubjectPrefix, head, m.Data, at))
		cancel()
		if err != nil {
			return fmt.Errorf("publish %s: %w (nothing lost: it stays in the quarantine; run the command again)", head.WebhookID, err)
		}
		r.published++
		if ack.Duplicate {
			r.duplicates++
		}
		if err := st.DeleteMsg(ctx, m.Sequence); err != nil {
			return fmt.Errorf("remove %s from %s (it is archived; a second redrive finds it a duplicate): %w", head.WebhookID, sc.Name, err)
		}
	}
}

// examine authenticates and validates a quarantined delivery as the
// receiver would now.
func (r *redrive) examine(class string, m *jetstream.RawStreamMsg) (events.Head, error) {
	sigs := m.Header.Values(headerRejectedSignature)
	auth := m.Header.Get(headerRejectedAuth)
	switch {
	case len(sigs) > 0 && r.verifier != nil:
		if err := r.verifier.VerifyAny(m.Data, sigs...); err != nil {
			return events.Head{}, err
		}
	case class == classInvalid && auth == authToken && len(r.cfg.tokens()) > 0:
		// Its token was checked when it came; tokens are never kept.
	case class == classInvalid && auth == authUnsigned && r.cfg.AllowUnsigned:
	default:
		return events.Head{}, fmt.Errorf("%w: was %s, not verifiable with the current configuration", verify.ErrMissing, strings.TrimSpace(auth))
	}
	return events.Validate(m.Data)
}
