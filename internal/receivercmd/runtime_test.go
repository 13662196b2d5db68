package receivercmd

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestParseMemoryLimit(t *testing.T) {
	for in, want := range map[string]int64{
		"536870912\n":         536870912,
		"max\n":               0,
		"9223372036854771712": 0, // cgroup v1 without a limit
		"":                    0,
		"-1":                  0,
	} {
		got, ok := parseMemoryLimit(in)
		if got != want || ok != (want > 0) {
			t.Errorf("%q: %d %v, want %d", in, got, ok, want)
		}
	}
}

// TestTuneRuntime: the collector target is set only when GOGC is not; a
// GOGC of the environment is kept. (Not parallel: the settings are the
// process's.)
func TestTuneRuntime(t *testing.T) {
	old := debug.SetGCPercent(100)
	oldLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(old); debug.SetMemoryLimit(oldLimit) })

	s := tuneRuntime(func(k string) string { return map[string]string{"GOMEMLIMIT": "1GiB"}[k] })
	if s.GCPercent != gcPercent || debug.SetGCPercent(100) != gcPercent {
		t.Errorf("GOGC unset: settings %+v, collector not at %d", s, gcPercent)
	}
	if s.MemoryLimit != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("GOMEMLIMIT set: the memory limit was changed (%+v)", s)
	}
	s = tuneRuntime(func(k string) string { return map[string]string{"GOGC": "100", "GOMEMLIMIT": "1GiB"}[k] })
	if s != (runtimeSettings{}) || debug.SetGCPercent(100) != 100 {
		t.Errorf("GOGC set: settings %+v, collector changed", s)
	}
	if limit, ok := cgroupMemoryLimit(); ok {
		s = tuneRuntime(func(k string) string { return map[string]string{"GOGC": "100"}[k] })
		if want := int64(float64(limit) * memoryLimitShare); s.MemoryLimit != want || debug.SetMemoryLimit(-1) != want {
			t.Errorf("in a %d-byte container: settings %+v, want a limit of %d", limit, s, want)
		}
	}
}
