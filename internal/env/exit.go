package env

import (
	"errors"
	"fmt"
)

// The exit statuses of every binary, as --help states them.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitFailure: the command was understood and failed (a server away,
	// bad configuration, a refused ClickHouse version).
	ExitFailure = 1
	// ExitUsage: the command line was not understood (an unknown command
	// or flag, a missing or extra argument); nothing was run.
	ExitUsage = 2
)

// ExitStatusHelp is the paragraph of every binary's --help that states them.
const ExitStatusHelp = "Exit status: 0 success, 1 failure, 2 usage error (unknown command or flag, missing argument).\n"

// ErrUsage is matched (errors.Is) by every error Usage marks: callers and
// tests branch on it, ExitCode maps it to ExitUsage.
var ErrUsage = errors.New("usage error")

// usageError marks an error of the command line.
type usageError struct{ err error }

func (e usageError) Error() string        { return e.err.Error() }
func (e usageError) Unwrap() error        { return e.err }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// Usage marks err as a usage error: ExitCode gives ExitUsage for it and for
// any error that wraps it. Usage(nil) is nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// Usagef is Usage of a formatted error.
func Usagef(format string, args ...any) error { return Usage(fmt.Errorf(format, args...)) }

// ExitCode is the exit status for what a binary's run returned.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	}
	return ExitFailure
}
