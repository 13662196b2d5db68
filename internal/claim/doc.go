// Package claim sends a notification once for every sink replica: it
// claims the notification's key in a JetStream KV bucket that all replicas
// share, publishes the notification on a NATS subject and POSTs it to a
// webhook, and settles the claim with the destinations that took it. Alerts
// (internal/alert) and change summaries (internal/changes) are its two
// users, each with a bucket of its own (declared with the other JetStream
// buckets in internal/stream).
//
// Several sink replicas share the consumer and any may restart, so neither
// "already sent" nor "being sent" can live in one process's memory: the
// replica whose claim succeeds sends, the others and a restarted sink see
// the claim and do not. A delivery that failed releases the claim with the
// destinations that did take it, and the next claimer delivers to the
// others only; a sink killed while sending holds the claim for Lease, after
// which another replica takes it over.
//
// Files:
//   - claim.go: Claims and Claim, what a claim store answers;
//   - kv.go: KVClaims, the claim store on a JetStream KV bucket, and the
//     states of a claim's value (sending, released, sent);
//   - channel.go: Channel, the destinations (a NATS subject, a webhook) and
//     Send, claim then publish and POST;
package claim
