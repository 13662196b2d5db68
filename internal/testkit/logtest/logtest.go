// Package logtest collects what a component logged, for tests that read it
// back: that a line names the crawl, that a secret never appears.
package logtest

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// Buffer collects log output written from several goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WithoutSecret returns a logger into a Buffer that is checked, when the
// test ends, never to hold secret (an API key, say).
func WithoutSecret(t testing.TB, secret string) (zerolog.Logger, *Buffer) {
	t.Helper()
	buf := &Buffer{}
	t.Cleanup(func() {
		if strings.Contains(buf.String(), secret) {
			t.Errorf("the secret reached the logs:\n%s", buf.String())
		}
	})
	return zerolog.New(buf), buf
}
