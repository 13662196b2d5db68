// Package logtest collects what a component logged, for tests that read it
// back: that a line names the crawl, that a secret never appears.
package logtest

import (
	"bytes"
	"sync"
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
