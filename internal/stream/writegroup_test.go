package stream

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// socket is the net.Conn under a groupConn in these tests: it records each
// write, and a write waits while the test holds gate.
type socket struct {
	net.Conn
	gate   sync.Mutex
	mu     sync.Mutex
	writes [][]byte
	began  chan struct{} // a write has begun (buffered)
	err    error
	closed bool
}

func newSocket() *socket { return &socket{began: make(chan struct{}, 16)} }

func (s *socket) Write(p []byte) (int, error) {
	s.began <- struct{}{}
	s.gate.Lock()
	defer s.gate.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	s.writes = append(s.writes, bytes.Clone(p))
	return len(p), nil
}

func (s *socket) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *socket) written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var w []string
	for _, b := range s.writes {
		w = append(w, string(b))
	}
	return w
}

// TestWriteGroupGathers: while one publisher writes, the bytes of the
// others only gather, and go out in its next write, in the order they came.
func TestWriteGroupGathers(t *testing.T) {
	t.Parallel()
	s := newSocket()
	c := &groupConn{Conn: s}
	s.gate.Lock() // the socket's first write will wait
	done := make(chan error)
	go func() {
		c.owe() // a publisher's promise
		if _, err := c.Write([]byte("A")); err != nil {
			done <- err
			return
		}
		done <- c.settle()
	}()
	<-s.began // A is in the socket's write
	for _, p := range []string{"B", "C"} {
		if n, err := c.Write([]byte(p)); n != 1 || err != nil {
			t.Fatalf("Write(%s) = %d, %v while another writes", p, n, err)
		}
	}
	s.gate.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := s.written(); len(got) != 2 || got[0] != "A" || got[1] != "BC" {
		t.Errorf("socket writes %q, want [A BC]", got)
	}
}

// TestWriteGroupNeverStrands: a write deferred on a publisher's promise
// goes out when that publisher settles, even if the deferred bytes were
// another's (a PING) and the publisher's own publish never wrote; with no
// promise owed, a write is on the socket before Write returns.
func TestWriteGroupNeverStrands(t *testing.T) {
	t.Parallel()
	s := newSocket()
	c := &groupConn{Conn: s}
	if _, err := c.Write([]byte("PING")); err != nil {
		t.Fatal(err)
	}
	if got := s.written(); len(got) != 1 || got[0] != "PING" {
		t.Fatalf("with no promise owed, socket writes %q, want [PING]", got)
	}
	c.owe()
	if _, err := c.Write([]byte("SUB")); err != nil {
		t.Fatal(err)
	}
	if got := s.written(); len(got) != 1 {
		t.Fatalf("a write deferred on a promise went out before the settle: %q", got)
	}
	if err := c.settle(); err != nil {
		t.Fatal(err)
	}
	if got := s.written(); len(got) != 2 || got[1] != "SUB" {
		t.Errorf("after the settle, socket writes %q, want [PING SUB]", got)
	}
	if c.owed != 0 || c.writing || len(c.pending) != 0 {
		t.Errorf("after the settle: owed %d, writing %v, %d bytes pending", c.owed, c.writing, len(c.pending))
	}
	// A promise kept without a write leaves nothing owed: the next write
	// goes out at once.
	c.owe()
	if err := c.settle(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("PUB")); err != nil {
		t.Fatal(err)
	}
	if got := s.written(); len(got) != 3 || got[2] != "PUB" {
		t.Errorf("socket writes %q, want PUB written at once", got)
	}
}

// TestWriteGroupWriteError: once the socket fails a write, it is closed
// (so that nats.go's read loop sees the loss and reconnects) and every
// later write and settle fails with that error.
func TestWriteGroupWriteError(t *testing.T) {
	t.Parallel()
	s := newSocket()
	s.err = errors.New("broken pipe")
	c := &groupConn{Conn: s}
	if _, err := c.Write([]byte("PUB")); err == nil {
		t.Fatal("a failed socket write was reported written")
	}
	if !s.closed {
		t.Error("the socket was not closed after its write failed")
	}
	if _, err := c.Write([]byte("PUB")); err == nil {
		t.Error("a write after the failure succeeded")
	}
	c.owe()
	if err := c.settle(); err == nil {
		t.Error("a settle after the failure succeeded")
	}
}

// failingWrites is a socket whose writes fail once fail is set.
type failingWrites struct {
	net.Conn
	fail *atomic.Bool
}

func (f failingWrites) Write(p []byte) (int, error) {
	if f.fail.Load() {
		return 0, errors.New("injected write failure")
	}
	return f.Conn.Write(p)
}

// TestPublishWriteFailsAfterHandOff: a publish whose message nats.go took
// but whose socket write then failed is unavailable (the sender gets its
// 503), and its reply slot is not reused: the message may have reached the
// server, and its PubAck must never be read as another delivery's.
func TestPublishWriteFailsAfterHandOff(t *testing.T) {
	t.Parallel()
	_, _, _, cfg := startJetStream(t)
	var fail atomic.Bool
	writes := NewWriteGroup(2 * time.Second)
	writes.socket = func(c net.Conn) net.Conn { return failingWrites{Conn: c, fail: &fail} }
	_, p := groupPublisher(t, cfg, writes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.Publish(ctx, envelope(t, cfg, randomBody(100))); err != nil {
		t.Fatal(err)
	}
	slots := len(p.acks.free)
	fail.Store(true)
	if _, err := p.Publish(ctx, envelope(t, cfg, randomBody(100))); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("publish over a failing socket = %v, want ErrUnavailable", err)
	}
	if got := len(p.acks.free); got != slots-1 {
		t.Errorf("free reply slots %d after the failed write, want %d (the slot kept out of reuse)", got, slots-1)
	}
}

// groupPublisher connects to cfg's server through writes (with opts, and no
// reconnect buffer, as the receiver) and returns the connection and a
// Publisher sharing its writes; all of it is closed when the test ends.
func groupPublisher(t *testing.T, cfg Config, writes *WriteGroup, opts ...nats.Option) (*nats.Conn, *Publisher) {
	t.Helper()
	nc, js := connectJS(t, cfg.URL, append(append(writes.Options(), nats.ReconnectBufSize(-1)), opts...)...)
	p := NewPublisher(nc, js, cfg, PublisherOptions{Writes: writes})
	t.Cleanup(p.Close)
	return nc, p
}
