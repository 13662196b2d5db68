// Package tcpproxy is a TCP path to a real server that a test can cut and
// mend: a client behind it loses its server as in a network or server
// outage, while the server itself, and other clients, keep working.
package tcpproxy

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy forwards each connection it accepts to its target while mended.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

// Start listens on a free loopback port and forwards to target (host:port,
// or a URL such as nats://host:port) until the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(target, "://"); i >= 0 {
		target = target[i+3:]
	}
	p := &Proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go p.accept()
	return p
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		var s net.Conn
		if !p.cut {
			s, err = net.Dial("tcp", p.target)
		}
		if s == nil || err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		go func() { _, _ = io.Copy(c, s); c.Close() }()
	}
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection through the proxy and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Mend lets connections through again.
func (p *Proxy) Mend() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}
