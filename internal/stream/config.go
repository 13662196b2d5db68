// Package stream owns crawlhouse's connection to JetStream and everything
// it keeps there: connecting with the configured credentials (connect.go),
// creating or updating the events stream and its body store (stream.go),
// their partitions by job (partition.go, NATS_STREAM_PARTITIONS), the
// dead-letter stream and its body store (deadletter.go), the receiver's
// quarantine streams (quarantine.go) and the key-value buckets of the
// alerts' and change summaries' claims and of the backfill's state (kv.go),
// running an embedded server (embedded.go) and syncing its store on demand
// (storesync.go, for the receiver's write-ahead log), and publishing
// deliveries that wait for their PubAck (publish.go, acks.go), with optional
// group commit (batch.go). The message form of a delivery is
// internal/delivery's, a claim's internal/claim's. The receiver publishes
// through it; the sink connects through it.
package stream

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Config is the JetStream part of a binary's configuration.
type Config struct {
	// URL lists the servers, comma-separated.
	URL string `envconfig:"NATS_URL" default:"nats://127.0.0.1:4222" desc:"JetStream server(s), comma-separated"`
	// Creds is a credentials file (JWT and seed).
	Creds string `envconfig:"NATS_CREDS" desc:"credentials file (JWT and seed)"`
	// Token is an authentication token.
	Token string `envconfig:"NATS_TOKEN" desc:"authentication token"`
	// User and Password authenticate by name.
	User     string `envconfig:"NATS_USER" desc:"user name"`
	Password string `envconfig:"NATS_PASSWORD" desc:"password of NATS_USER"`
	// TLSCA is a CA file; setting it turns TLS on.
	TLSCA string `envconfig:"NATS_TLS_CA" desc:"CA file; setting it turns TLS on"`
	// Stream is the events stream's name.
	Stream string `envconfig:"NATS_STREAM" default:"CRAWL_EVENTS" desc:"stream name (created or updated at start)"`
	// SubjectPrefix: events go to "<prefix>.<type>".
	SubjectPrefix string `envconfig:"NATS_SUBJECT_PREFIX" default:"crawl.events" desc:"events go to <prefix>.<type>"`
	// DedupWindow is the stream's duplicate window. It covers the sender's
	// retries at about 1, 5 and 15 minutes; the ids are held in server
	// memory, so it is not made longer: the ClickHouse table key removes
	// duplicates beyond it.
	DedupWindow time.Duration `envconfig:"NATS_DEDUP_WINDOW" default:"30m" desc:"stream duplicate window (Nats-Msg-Id = webhookId)"`
	// MaxAge is the stream's retention: replay and redrive are possible
	// inside it.
	MaxAge time.Duration `envconfig:"NATS_MAX_AGE" default:"168h" desc:"stream retention"`
	// Replicas is the stream's replica count (3 on a cluster).
	Replicas int `envconfig:"NATS_REPLICAS" default:"1" desc:"stream replicas (3 on a cluster)"`
	// Partitions spreads the deliveries over that many events streams, one
	// leader each (partition.go); 1 is the one stream NATS_STREAM.
	Partitions int `envconfig:"NATS_STREAM_PARTITIONS" default:"1" desc:"events streams the deliveries are spread over by job (1: the one stream NATS_STREAM)"`
}

// Validate checks the values that the server would otherwise reject later
// and less clearly.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.URL) == "" {
		errs = append(errs, errors.New("NATS_URL: must not be empty"))
	}
	if c.Stream == "" || strings.ContainsAny(c.Stream, ". *>") {
		errs = append(errs, fmt.Errorf("NATS_STREAM: %q must be non-empty with no '.', '*', '>' or spaces", c.Stream))
	}
	if c.SubjectPrefix == "" || strings.ContainsAny(c.SubjectPrefix, " *>") || strings.HasSuffix(c.SubjectPrefix, ".") {
		errs = append(errs, fmt.Errorf("NATS_SUBJECT_PREFIX: %q is not a subject prefix", c.SubjectPrefix))
	}
	if c.DedupWindow <= 0 {
		errs = append(errs, errors.New("NATS_DEDUP_WINDOW: must be positive"))
	}
	if c.MaxAge < c.DedupWindow {
		errs = append(errs, errors.New("NATS_MAX_AGE: must be at least NATS_DEDUP_WINDOW"))
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("NATS_REPLICAS: %d is not between 1 and 5", c.Replicas))
	}
	// 0, a Config built in code without it, is one stream, as 1.
	if c.Partitions < 0 || c.Partitions > MaxPartitions {
		errs = append(errs, fmt.Errorf("NATS_STREAM_PARTITIONS: %d is not between 1 and %d", c.Partitions, MaxPartitions))
	}
	if c.Token != "" && c.User != "" {
		errs = append(errs, errors.New("NATS_TOKEN and NATS_USER: set one, not both"))
	}
	return errors.Join(errs...)
}

// Subjects is the stream's subject filter: every event type under the prefix.
func (c Config) Subjects() []string { return []string{c.SubjectPrefix + ".>"} }

// BodyBucket is the object store that holds bodies too large for a message.
func (c Config) BodyBucket() string { return c.Stream + "_BODIES" }
