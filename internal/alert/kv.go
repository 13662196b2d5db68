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

// KVClaims keeps alert claims in a JetStream KV bucket whose entries expire
// one window after they were written: Create succeeds for exactly one
// replica per crawl and window, and the claim survives any sink restart.
type KVClaims struct {
	kv jetstream.KeyValue
}

var _ Claims = (*KVClaims)(nil)

// NewKVClaims creates or updates the bucket for window, with the stream's
// replica count.
func NewKVClaims(ctx context.Context, js jetstream.JetStream, window time.Duration, replicas int) (*KVClaims, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      ClaimsBucket,
		Description: "crawlhouse: alerts sent, one per crawl per ALERT_WINDOW",
		TTL:         window,
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("alert claims bucket %s: %w", ClaimsBucket, err)
	}
	return &KVClaims{kv: kv}, nil
}

// Claim records the crawl's alert for this window; false if another replica
// (or this one before a restart) already did.
func (c *KVClaims) Claim(ctx context.Context, crawlID string) (bool, error) {
	_, err := c.kv.Create(ctx, crawlID, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim alert of crawl %s: %w", crawlID, err)
	}
	return true, nil
}
