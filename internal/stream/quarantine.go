package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The quarantine is where the receiver keeps the deliveries it refused,
// for a second look (`receiver redrive-rejected`), in one stream per class
// so that no amount of unauthenticated traffic can evict what an
// authenticated sender sent. `sink delete` purges taken-down deliveries
// from them. Nothing in them is archived. Why a delivery is refused, and
// what is kept of it, are the receiver's (internal/receiver, quarantine.go).
const (
	// QuarantineInvalid: the delivery was authenticated and failed
	// validation (answered 400).
	QuarantineInvalid = "invalid"
	// QuarantineUnverified: its signature was well-formed but matched no
	// secret (answered 401).
	QuarantineUnverified = "unverified"
)

// QuarantineClasses returns both classes, the invalid first. The slice is
// the caller's.
func QuarantineClasses() []string { return []string{QuarantineInvalid, QuarantineUnverified} }

// QuarantineStreams names the quarantine's streams. Both binaries read it, with
// the same default: the receiver writes the streams, the sink purges them.
type QuarantineStreams struct {
	// QuarantineStream is the prefix of the streams' names and subjects:
	// streams <name>_INVALID and <name>_UNVERIFIED, subjects
	// <name>.invalid and <name>.unverified.
	QuarantineStream string `envconfig:"RECEIVER_QUARANTINE_STREAM" default:"CRAWL_REJECTED" desc:"prefix of the quarantine streams <name>_INVALID and <name>_UNVERIFIED (the receiver keeps refused deliveries there; sink delete purges them)"`
}

// Validate reports a prefix that could not name a stream.
func (q QuarantineStreams) Validate() error {
	if n := q.prefix(); n == "" || strings.ContainsAny(n, ".*> \t") {
		return errors.New("RECEIVER_QUARANTINE_STREAM: must be a stream name (no '.', '*', '>' or blanks)")
	}
	return nil
}

func (q QuarantineStreams) prefix() string { return strings.TrimSpace(q.QuarantineStream) }

// NameOf is the stream of class: <name>_INVALID, <name>_UNVERIFIED.
func (q QuarantineStreams) NameOf(class string) string {
	return q.prefix() + "_" + strings.ToUpper(class)
}

// SubjectOf is the subject of class: <name>.invalid, <name>.unverified.
func (q QuarantineStreams) SubjectOf(class string) string { return q.prefix() + "." + class }

// StreamOf is the stream of class, holding at most maxBytes (the
// oldest dropped first) for at most maxAge.
func (q QuarantineStreams) StreamOf(class string, maxBytes int64, maxAge time.Duration, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        q.NameOf(class),
		Description: "crawlhouse: refused deliveries (" + class + ") kept for receiver redrive-rejected; never archived",
		Subjects:    []string{q.SubjectOf(class)},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		// The newest are kept: after a rotation gone wrong, the latest
		// deliveries are the ones the operator can still save.
		Discard:  jetstream.DiscardOld,
		MaxBytes: maxBytes,
		MaxAge:   maxAge,
		// A sender's retries of one invalid delivery are kept once (the
		// receiver gives them a message id); the ids are held in server
		// memory, so the window is short and unverified messages carry
		// none.
		Duplicates: 2 * time.Minute,
		Replicas:   replicas,
	}
}

// EnsureQuarantine creates the stream of every class, or updates it to its
// settings: streamOf(class), the receiver's QuarantineStreams.StreamOf
// with that class's limits.
func EnsureQuarantine(ctx context.Context, js jetstream.JetStream, streamOf func(class string) jetstream.StreamConfig) error {
	for _, class := range QuarantineClasses() {
		sc := streamOf(class)
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("create or update quarantine stream %s: %w", sc.Name, err)
		}
	}
	return nil
}
