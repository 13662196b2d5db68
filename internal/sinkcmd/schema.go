package sinkcmd

import (
	"errors"
	"fmt"
	"sync"
)

// schemaState is the state of the archive's migrations as /readyz reports
// it under "migrations": not ready until start-up has applied them, and while
// a migration cannot proceed, why. A sink whose schema is behind archives
// nothing, so it must not look ready while start-up retries (the reason is
// also logged with each retry).
type schemaState struct {
	mu  sync.Mutex
	err error
}

// errNotMigrated is the answer before the first attempt ends.
var errNotMigrated = errors.New("applying the ClickHouse migrations")

func newSchemaState() *schemaState { return &schemaState{err: errNotMigrated} }

// migrated records the outcome of one attempt: nil once applied, else the
// error that stopped it (kept until an attempt succeeds).
func (s *schemaState) migrated(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("migration cannot proceed (start-up retries it): %w", err)
	}
	s.err = err
}

// Err is the readiness answer.
func (s *schemaState) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
