package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The JetStream key-value buckets crawlhouse keeps beside its streams, each
// with the events stream's replica count (on a cluster they must survive
// the loss of a node) and file storage.
const (
	// AlertClaimsBucket holds the alerts' claims (internal/claim), one key
	// per crawl, each expiring one ALERT_WINDOW after it was written: one
	// alert per crawl per window.
	AlertClaimsBucket = "CRAWL_ALERTS"
	// ChangeClaimsBucket holds the change summaries' claims, one key per
	// job, kept ChangeClaimsTTL: a job's summary is never sent twice within
	// it, whatever is replayed or backfilled again.
	ChangeClaimsBucket = "CRAWL_CHANGES"
	// BackfillBucket holds the backfill's state and leases
	// (internal/backfill), one key per job, each kept BackfillStateTTL
	// after its last write.
	BackfillBucket = "CRAWL_BACKFILL"
)

const (
	// ChangeClaimsTTL is how long a change summary's claim is kept.
	ChangeClaimsTTL = 90 * 24 * time.Hour
	// BackfillStateTTL is how long a job's backfill state is kept: the
	// crawl API keeps results 24 h after a job, so a record older than
	// that has nothing left to recover.
	BackfillStateTTL = 8 * 24 * time.Hour
)

// EnsureAlertClaims creates the alerts' claims bucket, or updates it to
// window (ALERT_WINDOW) and replicas.
func EnsureAlertClaims(ctx context.Context, js jetstream.JetStream, window time.Duration, replicas int) (jetstream.KeyValue, error) {
	return ensureKV(ctx, js, "claims", AlertClaimsBucket, "crawlhouse: alerts sent, one per crawl per ALERT_WINDOW", window, replicas)
}

// EnsureChangeClaims creates the change summaries' claims bucket, or
// updates it to replicas.
func EnsureChangeClaims(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	return ensureKV(ctx, js, "claims", ChangeClaimsBucket, "crawlhouse: change summaries sent, one per job", ChangeClaimsTTL, replicas)
}

// EnsureBackfillState creates the backfill's state bucket, or updates it to
// replicas.
func EnsureBackfillState(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	return ensureKV(ctx, js, "backfill state", BackfillBucket, "crawlhouse backfill state and leases, one key per crawl", BackfillStateTTL, replicas)
}

// ensureKV creates or updates a bucket (what it holds: what) of one value
// per key, whose keys expire ttl after their last write (0: never). Every
// user compares and sets a key on its revision: history is of no use.
func ensureKV(ctx context.Context, js jetstream.JetStream, what, bucket, description string, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: description,
		TTL:         ttl,
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("%s bucket %s: %w", what, bucket, err)
	}
	return kv, nil
}
