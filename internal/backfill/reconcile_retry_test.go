package backfill

import (
	"testing"
	"time"
)

func TestFailedRunRetryWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{
		{1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second},
		{5, 160 * time.Second}, {6, 5 * time.Minute}, {40, 5 * time.Minute},
	} {
		if got := retryWait(tc.failures, 5*time.Minute); got != tc.want {
			t.Errorf("retryWait(%d) = %s, want %s", tc.failures, got, tc.want)
		}
	}
}
