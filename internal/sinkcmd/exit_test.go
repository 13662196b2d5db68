package sinkcmd_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	crawlenv "github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
)

// TestExitStatus: the status `sink` exits with (crawlenv.ExitCode of what Run
// returns) for each kind of command line, and --help says which is which.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	noEnv := func(string) string { return "" }
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"help", []string{"sink", "--help"}, crawlenv.ExitOK},
		{"command help", []string{"sink", "status", "--help"}, crawlenv.ExitOK},
		{"version", []string{"sink", "--version"}, crawlenv.ExitOK},
		{"unknown command", []string{"sink", "migrat"}, crawlenv.ExitUsage},
		{"unknown flag", []string{"sink", "--verbose"}, crawlenv.ExitUsage},
		{"missing argument", []string{"sink", "status"}, crawlenv.ExitUsage},
		{"extra argument", []string{"sink", "migrate", "now"}, crawlenv.ExitUsage},
		{"backfill without a job", []string{"sink", "backfill"}, crawlenv.ExitUsage},
		{"backfill of an unknown kind", []string{"sink", "backfill", "-kind", "monitor", "x"}, crawlenv.ExitUsage},
		{"probe without a URL", []string{"sink", "probe"}, crawlenv.ExitUsage},
		{"probe of nothing listening", []string{"sink", "probe", "http://127.0.0.1:1/readyz"}, crawlenv.ExitFailure},
		{"configuration missing", []string{"sink", "migrate"}, crawlenv.ExitFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := sinkcmd.Run(context.Background(), tt.args, noEnv, &stdout, &stderr)
			if got := crawlenv.ExitCode(err); got != tt.want {
				t.Errorf("sink %s: exit %d (%v), want %d", strings.Join(tt.args[1:], " "), got, err, tt.want)
			}
		})
	}
	var help bytes.Buffer
	if err := sinkcmd.Run(context.Background(), []string{"sink", "--help"}, noEnv, &help, &help); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help.String(), crawlenv.ExitStatusHelp) {
		t.Errorf("sink --help does not state the exit statuses:\n%s", help.String())
	}
}
