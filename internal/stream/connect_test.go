package stream_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// TestCloseLogsNoWarning: closing a connection, as every binary does on a
// normal exit, logs no warning ("nats disconnected" did).
func TestCloseLogsNoWarning(t *testing.T) {
	t.Parallel()
	url := streamtest.Start(t)
	var logged syncBuffer
	// nats.go runs its handlers in order on one goroutine: once the
	// closed handler runs, the disconnect handler has.
	closed := make(chan struct{})
	nc, _, err := stream.Connect(stream.Config{URL: url}, "test", zerolog.New(&logged).Level(zerolog.InfoLevel),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("the closed handler never ran")
	}
	if out := logged.String(); strings.Contains(out, "warn") {
		t.Errorf("closing the connection logged a warning:\n%s", out)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
