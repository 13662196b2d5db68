package browsertest

import (
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
)

// Listener is a TCP listener that counts the connections made to it and
// closes each at once. A Beacon sees requests; a Listener sees what comes
// before any request: a preconnect's TCP connection, or the TLS hello of
// an https one, that the browser opens on a hint alone.
type Listener struct {
	ln    net.Listener
	conns atomic.Int64
}

// StartListener listens on addr (such as "127.0.0.2:0": any address of
// 127.0.0.0/8 is the loopback on Linux) until t ends.
func StartListener(t testing.TB, addr string) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("browsertest: listen on %s: %v", addr, err)
	}
	l := &Listener{ln: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			l.conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return l
}

// HostPort is the listener's address, host:port.
func (l *Listener) HostPort() string {
	a := l.ln.Addr().(*net.TCPAddr)
	return net.JoinHostPort(a.IP.String(), strconv.Itoa(a.Port))
}

// Port is the listener's port.
func (l *Listener) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }

// Connections is how many connections were made to the listener so far.
func (l *Listener) Connections() int64 { return l.conns.Load() }
