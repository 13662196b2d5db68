package sinkcmd

import "errors"

// ErrUsage is matched (errors.Is) by every error of a command's arguments:
// an unknown flag, a missing or malformed argument. cmd/sink exits 2 for
// it, 1 for every other failure.
var ErrUsage = errors.New("usage error")

// usageError marks err as a usage error and keeps its text.
type usageError struct{ err error }

func (e usageError) Error() string        { return e.err.Error() }
func (e usageError) Unwrap() error        { return e.err }
func (e usageError) Is(target error) bool { return target == ErrUsage }
