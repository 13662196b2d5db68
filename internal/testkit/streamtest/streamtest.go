// Package streamtest runs a real JetStream server inside a test process,
// as clickhousetest provides a real ClickHouse: tests talk to nats-server
// itself, never to a mock of it.
package streamtest

import (
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/stream"
)

// Start runs an embedded JetStream server on a free loopback port with its
// store in a temporary directory, shuts it down when the test ends, and
// returns its client URL.
func Start(t testing.TB) string {
	t.Helper()
	srv, err := stream.StartEmbedded(stream.Config{URL: "nats://127.0.0.1:-1"}, stream.EmbeddedConfig{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.ClientURL()
}
