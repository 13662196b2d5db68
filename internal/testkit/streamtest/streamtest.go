// Package streamtest runs a real JetStream server inside a test process,
// as clickhousetest provides a real ClickHouse: tests talk to nats-server
// itself, never to a mock of it.
package streamtest

import (
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

// Connect returns a connection to the server at url and a JetStream client
// on it, closed when the test ends.
func Connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}
