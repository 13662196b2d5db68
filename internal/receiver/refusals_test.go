package receiver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/rs/zerolog"
)

// TestRefusalLogSuppression: with an injected clock, the bucket lets
// RefusalBurst lines through, suppresses the rest, refills at RefusalRate
// a second, and the next line says how many it suppressed.
func TestRefusalLogSuppression(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	now := time.Unix(1_000_000, 0)
	l := newRefusalLog(zerolog.New(&out), func() time.Time { return now })
	for i := 0; i < RefusalBurst+30; i++ {
		l.refused(OutcomeInvalidSignature, "203.0.113.9", verify.ErrMismatch)
	}
	if n := strings.Count(out.String(), "\n"); n != RefusalBurst {
		t.Fatalf("%d lines for %d refusals at once, want the burst of %d", n, RefusalBurst+30, RefusalBurst)
	}
	now = now.Add(time.Duration(float64(time.Second) / RefusalRate))
	out.Reset()
	l.refused(OutcomeTimeout, "203.0.113.9", errTimeout)
	l.refused(OutcomeTimeout, "203.0.113.9", errTimeout)
	var line struct {
		Outcome    string
		Remote     string
		Suppressed int
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("after one token's refill: %d lines, want 1: %q", len(lines), out.String())
	}
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line.Outcome != OutcomeTimeout || line.Remote != "203.0.113.9" || line.Suppressed != 30 {
		t.Errorf("line %s: want outcome timeout, the remote address and 30 suppressed", lines[0])
	}
}
