// Package streamtest runs a real JetStream server inside a test process,
// as clickhousetest provides a real ClickHouse: tests talk to nats-server
// itself, never to a mock of it.
package streamtest

import (
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/tcpproxy"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
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

// ConnectThrough returns a connection to the server at url made as the
// binaries make theirs (stream.Connect: it reconnects forever), through a
// proxy the test cuts and mends (tcpproxy), once connected.
func ConnectThrough(t testing.TB, url string) (*nats.Conn, *tcpproxy.Proxy) {
	t.Helper()
	p := tcpproxy.Start(t, url)
	nc, _, err := stream.Connect(stream.Config{URL: "nats://" + p.Addr()}, "test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	deadline := time.Now().Add(time.Minute)
	for !nc.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatalf("no connection to %s through the proxy", url)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nc, p
}
