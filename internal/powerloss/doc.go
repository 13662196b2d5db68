// Package powerloss holds the test of the promise "a 2xx means the delivery
// survives a power loss" (its _test.go files; the package has no code of
// its own).
//
// The receiver runs as its binary with its embedded JetStream's store on a
// lazyfs mount (internal/testkit/lazyfs): writes sit in a simulated page
// cache until nats-server fsyncs them. Signed crawl.page deliveries go in
// from concurrent senders; every webhookId answered 2xx is recorded. Part
// way through, the receiver is killed with SIGKILL and the page cache
// dropped, as a power loss would; what remains on disk is then served by a
// receiver restarted on the bare directory, and every acknowledged
// webhookId must be in the stream, and, once the sink binary has drained
// it, in ClickHouse's pages table.
//
// The same test against a server that syncs lazily (NATS_SYNC_ALWAYS=false)
// must find acknowledged deliveries missing: that proves the test can fail.
//
// `go test ./internal/powerloss` runs a short version (a few hundred
// deliveries, one crash). The long version (more deliveries, several crashes
// in a row on the same store) runs when CRAWLHOUSE_POWERLOSS_SOAK=1, as
// scripts/soak.sh sets. The tests need FUSE (/dev/fuse and the privilege to
// mount): without it they fail under CI=true and are skipped elsewhere.
package powerloss
