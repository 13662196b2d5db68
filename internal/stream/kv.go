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
)

// ChangeClaimsTTL is how long a change summary's claim is kept.
const ChangeClaimsTTL = 90 * 24 * time.Hour

// EnsureAlertClaims creates the alerts' claims bucket, or updates it to
// window (ALERT_WINDOW) and replicas.
func EnsureAlertClaims(ctx context.Context, js jetstream.JetStream, window time.Duration, replicas int) (jetstream.KeyValue, error) {
	return ensureClaims(ctx, js, AlertClaimsBucket, "crawlhouse: alerts sent, one per crawl per ALERT_WINDOW", window, replicas)
}

// EnsureChangeClaims creates the change summaries' claims bucket, or
// updates it to replicas.
func EnsureChangeClaims(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	return ensureClaims(ctx, js, ChangeClaimsBucket, "crawlhouse: change summaries sent, one per job", ChangeClaimsTTL, replicas)
}

// ensureClaims creates or updates a claims bucket whose keys expire after
// ttl (0: never). One value per key: a claim is compared and set on its
// revision, its history is of no use.
func ensureClaims(ctx context.Context, js jetstream.JetStream, bucket, description string, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: description,
		TTL:         ttl,
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("claims bucket %s: %w", bucket, err)
	}
	return kv, nil
}
