package alert

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ClaimsBucket is the JetStream KV bucket of alert claims.
const ClaimsBucket = "CRAWL_ALERTS"

// KVClaims keeps claims in a JetStream KV bucket whose entries expire one
// TTL after they were written: Create succeeds for exactly one replica per
// key and TTL, and the claim survives any sink restart. Alerts claim a
// crawl per ALERT_WINDOW; change summaries (internal/changes) claim a job
// once, in a bucket of their own.
type KVClaims struct {
	kv jetstream.KeyValue
}

var _ Claims = (*KVClaims)(nil)

// NewKVClaims creates or updates the bucket for window, with the stream's
// replica count.
func NewKVClaims(ctx context.Context, js jetstream.JetStream, window time.Duration, replicas int) (*KVClaims, error) {
	return NewClaimsBucket(ctx, js, ClaimsBucket, "crawlhouse: alerts sent, one per crawl per ALERT_WINDOW", window, replicas)
}

// NewClaimsBucket creates or updates the claims bucket named bucket whose
// claims expire after ttl (0: never), with the stream's replica count.
func NewClaimsBucket(ctx context.Context, js jetstream.JetStream, bucket, description string, ttl time.Duration, replicas int) (*KVClaims, error) {
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
	return &KVClaims{kv: kv}, nil
}

// Claim records the job's notification (its alert for this window, its
// change summary); false if another replica (or this one before a restart)
// already did.
func (c *KVClaims) Claim(ctx context.Context, crawlID string) (bool, error) {
	_, err := c.kv.Create(ctx, crawlID, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim %s of job %s: %w", c.kv.Bucket(), crawlID, err)
	}
	return true, nil
}
