package backoff

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		s    Exponential
		n    int
		want time.Duration
	}{
		{"first", Exponential{First: time.Second, Max: time.Minute}, 1, time.Second},
		{"below one counts as one", Exponential{First: time.Second, Max: time.Minute}, -3, time.Second},
		{"doubles", Exponential{First: time.Second, Max: time.Minute}, 4, 8 * time.Second},
		{"capped", Exponential{First: time.Second, Max: time.Minute}, 7, time.Minute},
		{"huge attempt", Exponential{First: time.Second, Max: time.Minute}, math.MaxInt, time.Minute},
		{"cap below first", Exponential{First: time.Minute, Max: time.Second}, 1, time.Second},
		{"negative first", Exponential{First: -time.Second, Max: time.Minute}, 5, 0},
		{"zero cap", Exponential{First: time.Second}, 3, 0},
		{"no cap", Exponential{First: time.Second, Max: math.MaxInt64}, 3, 4 * time.Second},
		{"no cap saturates", Exponential{First: time.Second, Max: math.MaxInt64}, math.MaxInt, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.s.Delay(tc.n); got != tc.want {
				t.Errorf("Delay(%d) = %s, want %s", tc.n, got, tc.want)
			}
		})
	}
}

func TestDelayJitter(t *testing.T) {
	t.Parallel()
	s := Exponential{First: time.Second, Max: 8 * time.Second, Jitter: true}
	for n := 1; n < 100; n++ {
		d := Exponential{First: s.First, Max: s.Max}.Delay(n)
		if got := s.Delay(n); got < d/2 || got > d {
			t.Fatalf("Delay(%d) = %s, want in [%s, %s]", n, got, d/2, d)
		}
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	fail := errors.New("down")
	s := Exponential{First: time.Microsecond, Max: 4 * time.Microsecond}

	t.Run("until success", func(t *testing.T) {
		calls := 0
		var waits []time.Duration
		err := Retry(context.Background(), s, func() error {
			if calls++; calls < 5 {
				return fail
			}
			return nil
		}, func(n int, err error, wait time.Duration) bool {
			if n != len(waits)+1 || err != fail {
				t.Errorf("onErr(%d, %v)", n, err)
			}
			waits = append(waits, wait)
			return true
		})
		want := []time.Duration{time.Microsecond, 2 * time.Microsecond, 4 * time.Microsecond, 4 * time.Microsecond}
		if err != nil || calls != 5 || len(waits) != len(want) {
			t.Fatalf("err %v, calls %d, waits %v", err, calls, waits)
		}
		for i := range want {
			if waits[i] != want[i] {
				t.Errorf("waits %v, want %v", waits, want)
			}
		}
	})
	t.Run("onErr stops", func(t *testing.T) {
		calls := 0
		err := Retry(context.Background(), s, func() error { calls++; return fail },
			func(n int, _ error, _ time.Duration) bool { return n < 3 })
		if err != fail || calls != 3 {
			t.Errorf("err %v after %d calls, want %v after 3", err, calls, fail)
		}
	})
	t.Run("context ends the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		err := Retry(ctx, Exponential{First: time.Hour, Max: time.Hour}, func() error { return fail },
			func(int, error, time.Duration) bool { cancel(); return true })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	})
}
