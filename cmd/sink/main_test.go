package main

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// TestMain runs the sink's main instead of the tests when the test binary
// is started again by TestExitCodes, so that the exit code is the one
// users see.
func TestMain(m *testing.M) {
	if os.Getenv("SINK_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"sink"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestExitCodes: a usage error of `sink delete` exits 2, a failure 1.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"delete", "--host", "a.test/x", "--reason", "r"}, 2},
		{[]string{"delete", "--dry-run"}, 2},
		{[]string{"delete", "--list", "--no-such-flag"}, 2},
		// No ClickHouse listens on port 1: a failure, not a usage error.
		{[]string{"delete", "--list"}, 1},
	} {
		cmd := exec.Command(os.Args[0], tc.args...)
		cmd.Env = append(os.Environ(), "SINK_TEST_RUN_MAIN=1", "CLICKHOUSE_ADDR=127.0.0.1:1")
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != tc.want {
			t.Errorf("sink %v: %v, want exit code %d", tc.args, err, tc.want)
		}
	}
}
