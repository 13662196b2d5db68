package claim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// KVClaims keeps claims in a JetStream KV bucket whose entries expire one
// TTL after they were written (stream.EnsureAlertClaims,
// stream.EnsureChangeClaims): one replica at a time holds a key, and the
// claim survives any sink restart. Alerts claim a crawl per ALERT_WINDOW;
// change summaries claim a job once, in a bucket of their own.
//
// A key's value says where its notification stands:
//   - "sending": a replica holds it until the value's time (Lease after it
//     took it) and is delivering;
//   - "released": a delivery failed; the destinations that took it are
//     listed, and the next replica to look takes the claim and delivers to
//     the others only;
//   - "sent": every destination took it; nobody sends it again.
//
// A value of another shape (a claim written by a version before these
// states, which held only a time) counts as sent.
type KVClaims struct {
	kv jetstream.KeyValue
	// now is the clock leases are judged by.
	now func() time.Time
}

var _ Claims = (*KVClaims)(nil)

// NewKV returns the claims kept in kv, a bucket internal/stream created.
func NewKV(kv jetstream.KeyValue) (*KVClaims, error) {
	if kv == nil {
		return nil, errors.New("claim: a KV bucket is required")
	}
	return &KVClaims{kv: kv, now: time.Now}, nil
}

// Claim states, as a claim's value names them.
const (
	claimSending  = "sending"
	claimReleased = "released"
	claimSent     = "sent"
)

// claimValue is a claim's value in the bucket.
type claimValue struct {
	State string `json:"state"`
	// Until is when a sending holder's lease ends.
	Until time.Time `json:"until,omitzero"`
	// Delivered names the destinations that took the notification.
	Delivered []string `json:"delivered,omitempty"`
}

func (v claimValue) encode() []byte {
	b, _ := json.Marshal(v) // strings and a time: cannot fail
	return b
}

// decodeClaim reads a claim's value; anything else than a value of this
// version (an older claim, a time) is a notification sent.
func decodeClaim(b []byte) claimValue {
	var v claimValue
	if json.Unmarshal(b, &v) != nil || (v.State != claimSending && v.State != claimReleased) {
		return claimValue{State: claimSent}
	}
	return v
}

// Claim takes the key's claim when nobody holds it: when it is new, when
// its last delivery failed (released), or when its holder's lease ran out
// (a sink killed while sending). The claim is taken by a compare-and-set
// on the key's revision, so exactly one replica gets it.
func (c *KVClaims) Claim(ctx context.Context, key string) (Claim, error) {
	now := c.now()
	hold := claimValue{State: claimSending, Until: now.Add(Lease)}
	rev, err := c.kv.Create(ctx, key, hold.encode())
	if err == nil {
		return Claim{Key: key, Held: true, rev: rev}, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return Claim{}, fmt.Errorf("claim %s of %s: %w", c.kv.Bucket(), key, err)
	}
	e, err := c.kv.Get(ctx, key)
	if err != nil {
		// Expired or deleted since Create: the next look creates it.
		return Claim{}, fmt.Errorf("claim %s of %s: read: %w", c.kv.Bucket(), key, err)
	}
	v := decodeClaim(e.Value())
	switch {
	case v.State == claimSent:
		return Claim{Key: key}, nil
	case v.State == claimSending && now.Before(v.Until):
		return Claim{Key: key, Until: v.Until}, nil
	}
	hold.Delivered = v.Delivered
	rev, err = c.kv.Update(ctx, key, hold.encode(), e.Revision())
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		// Another replica took it first: it holds it for a lease.
		return Claim{Key: key, Until: now.Add(Lease)}, nil
	}
	if err != nil {
		return Claim{}, fmt.Errorf("claim %s of %s: take over: %w", c.kv.Bucket(), key, err)
	}
	return Claim{Key: key, Held: true, Delivered: v.Delivered, rev: rev}, nil
}

// Settle ends a held claim: sent when done, else released with the
// destinations that took the notification so far (cl.Delivered and
// delivered), for the next claimer to deliver to the others.
func (c *KVClaims) Settle(ctx context.Context, cl Claim, delivered []string, done bool) error {
	v := claimValue{State: claimReleased, Delivered: slices.Concat(cl.Delivered, delivered)}
	if done {
		v = claimValue{State: claimSent, Delivered: v.Delivered}
	}
	if _, err := c.kv.Update(ctx, cl.Key, v.encode(), cl.rev); err != nil {
		return fmt.Errorf("settle %s of %s as %s: %w", c.kv.Bucket(), cl.Key, v.State, err)
	}
	return nil
}
