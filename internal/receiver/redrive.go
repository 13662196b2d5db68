package receiver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/nats-io/nats.go/jetstream"
)

// Redrive examines every delivery kept in the quarantine (quarantine.go)
// since that time with cfg, as the receiver would now: its kept signatures
// against WEBHOOK_SECRETS (an item authenticated by a shared token or
// unsigned passes only while that is still allowed), then validation. What
// passes both is published through pub as the receiver publishes it
// (Nats-Msg-Id = its webhookId, so repeated redrives and the sender's own
// retries collapse) and removed from the quarantine once JetStream
// confirmed it; the rest stays, counted by its reason now. It is the work
// of `receiver redrive-rejected`.
func Redrive(ctx context.Context, cfg Config, js jetstream.JetStream, pub Publisher, since time.Time) (Redriven, error) {
	verifier, err := cfg.verifier()
	if err != nil {
		return Redriven{}, fmt.Errorf("config: WEBHOOK_SECRETS: %w", err)
	}
	r := &redrive{cfg: cfg, verifier: verifier, pub: pub, since: since, Redriven: Redriven{Still: map[string]int{}}}
	for _, class := range classes {
		if err := r.class(ctx, js, class); err != nil {
			return r.Redriven, err
		}
	}
	return r.Redriven, nil
}

// Redriven is what one Redrive did.
type Redriven struct {
	// Examined were read; Published went into the events stream, of which
	// Duplicates were stored there already; Refused stay.
	Examined, Published, Duplicates, Refused int
	// Still counts what stays by "<class>: <reason>".
	Still map[string]int
}

// redrive is one run of redrive-rejected.
type redrive struct {
	cfg      Config
	verifier *verify.Verifier
	pub      Publisher
	since    time.Time
	Redriven
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
		r.Examined++
		head, err := r.examine(class, m)
		if err != nil {
			r.Refused++
			r.Still[class+": "+err.Error()]++
			continue
		}
		at, perr := time.Parse(time.RFC3339Nano, m.Header.Get(HeaderRejectedAt))
		if perr != nil {
			at = m.Time
		}
		pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
		ack, err := r.pub.Publish(pctx, delivery.NewEnvelope(r.cfg.SubjectPrefix, head, m.Data, at))
		cancel()
		if err != nil {
			return fmt.Errorf("publish %s: %w (nothing lost: it stays in the quarantine; run the command again)", head.WebhookID, err)
		}
		r.Published++
		if ack.Duplicate {
			r.Duplicates++
		}
		if err := st.DeleteMsg(ctx, m.Sequence); err != nil {
			return fmt.Errorf("remove %s from %s (it is archived; a second redrive finds it a duplicate): %w", head.WebhookID, sc.Name, err)
		}
	}
}

// examine authenticates and validates a quarantined delivery as the
// receiver would now.
func (r *redrive) examine(class string, m *jetstream.RawStreamMsg) (events.Head, error) {
	sigs := m.Header.Values(HeaderRejectedSignature)
	auth := m.Header.Get(HeaderRejectedAuth)
	switch {
	case len(sigs) > 0 && r.verifier != nil:
		if err := r.verifier.VerifyAny(m.Data, sigs...); err != nil {
			return events.Head{}, err
		}
	case class == ClassInvalid && auth == authToken && len(r.cfg.tokens()) > 0:
		// Its token was checked when it came; tokens are never kept.
	case class == ClassInvalid && auth == authUnsigned && r.cfg.AllowUnsigned:
	default:
		return events.Head{}, fmt.Errorf("%w: was %s, not verifiable with the current configuration", verify.ErrMissing, strings.TrimSpace(auth))
	}
	return events.Validate(m.Data)
}
