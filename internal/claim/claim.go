package claim

import (
	"context"
	"time"
)

// Claims records, for every replica, who sends a notification and where it
// went: Claim holds a key for one caller at a time until Settle says it was
// sent (nobody sends it again until the claim expires: one window later for
// an alert) or released (the next Claim takes it, to deliver the rest).
// KVClaims is the implementation.
type Claims interface {
	Claim(ctx context.Context, key string) (Claim, error)
	Settle(ctx context.Context, cl Claim, delivered []string, done bool) error
}

// Claim is one look at a notification's claim.
type Claim struct {
	Key string
	// Held: the caller holds the claim and must Settle it.
	Held bool
	// Delivered names the destinations an earlier holder delivered to.
	Delivered []string
	// Until, when not held and not zero, is when another replica's hold
	// ends: it is delivering. Not held and zero: sent already.
	Until time.Time

	rev uint64
}

// Lease is how long a replica holds a claim while it delivers: another
// replica takes the claim over only after it, so a sink killed while
// sending does not lose the notification. Send gives a delivery half of it,
// so a live holder always settles its claim before anyone may take it. The
// lease's end is judged by each replica's clock: clocks apart by more than
// half of it could let a second replica send.
const Lease = 5 * time.Minute
