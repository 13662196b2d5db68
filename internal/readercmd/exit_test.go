package readercmd_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	crawlenv "github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/readercmd"
	"github.com/crawlhouse/crawlhouse/internal/receivercmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
)

// TestExitStatus: the status the reader, the receiver and crawlsim exit
// with (env.ExitCode of what their Run returns) for each kind of command
// line, and their --help says which is which. The sink's are in sinkcmd.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	binaries := map[string]func(args []string, stdout *bytes.Buffer) error{
		"reader": func(args []string, out *bytes.Buffer) error {
			return readercmd.Run(context.Background(), args, func(string) string { return "" }, out, out)
		},
		"receiver": func(args []string, out *bytes.Buffer) error {
			return receivercmd.Run(context.Background(), args, func(string) string { return "" }, out, out)
		},
		"crawlsim": func(args []string, out *bytes.Buffer) error {
			return crawlsim.Run(context.Background(), args[1:], func(string) string { return "" }, out, out)
		},
	}
	tests := []struct {
		binary string
		args   []string
		want   int
	}{
		{"reader", []string{"--help"}, crawlenv.ExitOK},
		{"reader", []string{"--version"}, crawlenv.ExitOK},
		{"reader", []string{"serve"}, crawlenv.ExitUsage},
		{"reader", []string{"--port=1"}, crawlenv.ExitUsage},
		{"reader", []string{"probe"}, crawlenv.ExitUsage},
		{"reader", []string{"probe", "http://127.0.0.1:1/readyz"}, crawlenv.ExitFailure},
		{"reader", nil, crawlenv.ExitFailure}, // READER_TOKENS and the rest missing
		{"receiver", []string{"--help"}, crawlenv.ExitOK},
		{"receiver", []string{"--verbose"}, crawlenv.ExitUsage},
		{"receiver", []string{"redrive-rejected", "--since", "yesterday"}, crawlenv.ExitUsage},
		{"receiver", []string{"redrive-rejected", "--all"}, crawlenv.ExitUsage},
		{"receiver", nil, crawlenv.ExitFailure}, // WEBHOOK_SECRETS missing
		{"crawlsim", []string{"-help"}, crawlenv.ExitOK},
		{"crawlsim", []string{"-pages=ten"}, crawlenv.ExitUsage},
		{"crawlsim", []string{"-no-such-flag"}, crawlenv.ExitUsage},
		{"crawlsim", []string{"extra"}, crawlenv.ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.binary+" "+strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := binaries[tt.binary](append([]string{tt.binary}, tt.args...), &out)
			if got := crawlenv.ExitCode(err); got != tt.want {
				t.Errorf("exit %d (%v), want %d", got, err, tt.want)
			}
		})
	}
	for name, run := range binaries {
		var out bytes.Buffer
		if err := run([]string{name, "-help"}, &out); err != nil {
			t.Fatalf("%s -help: %v", name, err)
		}
		if !strings.Contains(out.String(), crawlenv.ExitStatusHelp) {
			t.Errorf("%s -help does not state the exit statuses:\n%s", name, out.String())
		}
	}
}
