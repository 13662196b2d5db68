// Package powerloss holds the test of the promise "a 2xx means the delivery
// survives a power loss" (its _test.go files; the package has no code of
// its own).
//
// The receiver runs as its binary with its embedded JetStream's store and
// its write-ahead log (RECEIVER_WAL_DIR) on one lazyfs mount
// (internal/testkit/lazyfs): writes sit in a simulated page cache until
// nats-server or pebble fsyncs them. Signed crawl.page deliveries go in from
// concurrent senders; every webhookId answered 2xx is recorded. Part way
// through, the receiver is killed with SIGKILL and the page cache dropped,
// as a power loss would; what remains on disk is then served by a receiver
// restarted on the bare directory (which replays the write-ahead log), and
// every acknowledged webhookId must be in the stream, and, once the sink
// binary has drained it, in ClickHouse's pages table. That holds for the
// durable fast layout of `make run` (the log in front of a lazily syncing
// server) and for the binary's defaults (a server that syncs always).
//
// The same test against a server that syncs lazily without the log must
// find acknowledged deliveries missing: that proves the test can fail. And
// the log's trimming waits for the stream's copy to be durable, which the
// receiver brings about itself (it fsyncs the server's store): a test holds
// the server's own sync back for an hour, waits until the log has let
// every entry go, and crashes, finding none missing. A log damaged on disk
// is salvaged: a test flips a byte mid-log and finds every entry outside
// the damaged block replayed by the receiver binary.
//
// `go test ./internal/powerloss` runs a short version (a few hundred
// deliveries, one crash). The long version (more deliveries, several crashes
// in a row on the same store) runs when CRAWLHOUSE_POWERLOSS_SOAK=1, as
// scripts/soak.sh sets. The tests need FUSE (/dev/fuse and the privilege to
// mount): without it they fail under CI=true and are skipped elsewhere.
package powerloss
