package stream

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// WriteGroup lets the publishes of one connection share their socket
// writes without a goroutine between them and the socket.
//
// nats.go writes a publish either from the publishing goroutine, holding
// the connection's lock for the whole write system call, so that the other
// publishers queue behind it and each then writes alone (WriteBufferSize
// 1), or from its flusher goroutine, which each publish must wake (the
// default). A WriteGroup sits under nats.go as the connection's socket
// (nats.SetCustomDialer): a publish's bytes are put in the group's buffer
// under nats.go's lock, and the publisher writes the buffer once it has
// released that lock (settle). While one publisher writes, the others
// only add to the buffer, and whatever gathered meanwhile goes out in the
// writer's next system call: one write, and one read in the server, for
// several deliveries, and no wake-up.
//
// Every byte put in the buffer is written promptly: a write is deferred
// only while a publisher that promised to settle has not yet done so
// (owed > 0), and every other write (PINGs, subscriptions, the handshake)
// goes out at once, or with the write in progress. No library offers this:
// nats.go's writer is internal to it, so the group is a net.Conn of its own.
// The receiver uses it with an external server; an in-process server's
// connection is a pipe, not dialled, and the sink's acknowledgements gain
// from nats.go's flusher gathering them.
type WriteGroup struct {
	dialer net.Dialer
	cur    atomic.Pointer[groupConn]
	// socket, when set, wraps each dialled connection (tests inject
	// failing writes with it).
	socket func(net.Conn) net.Conn
}

// NewWriteGroup returns a group whose connections are dialled with the
// given timeout (nats.go's own default is 2 s).
func NewWriteGroup(timeout time.Duration) *WriteGroup {
	return &WriteGroup{dialer: net.Dialer{Timeout: timeout}}
}

// Options are the connection options that put the group under nats.go:
// the dialer, and a write buffer that hands every publish to the socket.
func (g *WriteGroup) Options() []nats.Option {
	return []nats.Option{nats.SetCustomDialer(g), nats.WriteBufferSize(1)}
}

// Dial is nats.go's CustomDialer: each (re)connection gets a groupConn.
func (g *WriteGroup) Dial(network, address string) (net.Conn, error) {
	c, err := g.dialer.Dial(network, address)
	if err != nil {
		return nil, err
	}
	if g.socket != nil {
		c = g.socket(c)
	}
	gc := &groupConn{Conn: c}
	g.cur.Store(gc)
	return gc, nil
}

// promise tells the current connection that the caller will settle after
// its publish: the publish's write may wait for it. It returns nil (no
// promise) while nc is not connected, so that the writes of a handshake,
// made under nats.go's lock, are never left waiting for a publisher that
// waits for that lock.
func (g *WriteGroup) promise(nc *nats.Conn) *groupConn {
	c := g.cur.Load()
	if c == nil || !nc.IsConnected() {
		return nil
	}
	c.owe()
	return c
}

// maxKeptBuffer is the largest write buffer kept for the next writes.
const maxKeptBuffer = 4 << 20

type groupConn struct {
	net.Conn

	mu      sync.Mutex
	pending []byte // bytes not yet handed to the socket, in order
	spare   []byte // the buffer last written, reused for the next
	writing bool   // a goroutine is in drain: it writes what gathers
	owed    int    // promises not yet settled (at most that many deferred writes)
	err     error  // the socket's write error: every later write fails
}

// owe records a promise: one write may wait for its settle.
func (c *groupConn) owe() {
	c.mu.Lock()
	c.owed++
	c.mu.Unlock()
}

// Write adds p to the buffer. It writes the buffer itself unless another
// goroutine is writing (which takes p with its next write) or a promise
// is owed (its settle writes p).
func (c *groupConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	c.pending = append(c.pending, p...)
	if c.writing {
		c.mu.Unlock()
		return len(p), nil
	}
	if c.owed > 0 {
		c.owed--
		c.mu.Unlock()
		return len(p), nil
	}
	c.writing = true
	c.mu.Unlock()
	if err := c.drain(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// settle keeps a promise: it writes the buffer unless another goroutine
// is writing it. The error is the socket's, if a write failed.
func (c *groupConn) settle() error {
	c.mu.Lock()
	if c.owed > 0 {
		c.owed--
	}
	if c.writing || len(c.pending) == 0 {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.writing = true
	c.mu.Unlock()
	return c.drain()
}

// drain writes the buffer until it is empty, or until a promise is owed
// (whose settle writes what remains): a writer does not stay writing for
// the others. Called with c.writing set; it clears it.
func (c *groupConn) drain() error {
	for first := true; ; first = false {
		c.mu.Lock()
		if c.err != nil || len(c.pending) == 0 || (!first && c.owed > 0) {
			c.writing = false
			err := c.err
			c.mu.Unlock()
			return err
		}
		buf := c.pending
		c.pending = c.spare[:0]
		c.mu.Unlock()
		_, err := c.Conn.Write(buf)
		c.mu.Lock()
		if cap(buf) <= maxKeptBuffer {
			c.spare = buf[:0]
		} else {
			c.spare = nil
		}
		if err != nil && c.err == nil {
			// Part of a protocol operation may be on the wire: the
			// connection is unusable. Closing it makes nats.go's read
			// loop see the error and reconnect.
			c.err = err
			c.Conn.Close()
		}
		c.mu.Unlock()
	}
}

// Close writes what is buffered, then closes the socket.
func (c *groupConn) Close() error {
	c.mu.Lock()
	drain := !c.writing && len(c.pending) > 0 && c.err == nil
	if drain {
		c.writing = true
	}
	c.mu.Unlock()
	if drain {
		_ = c.drain()
	}
	return c.Conn.Close()
}
