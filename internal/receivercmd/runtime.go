package receivercmd

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// gcPercent is the receiver binary's collector target unless GOGC is set.
// Most of a delivery's garbage is made by the NATS client and server (a
// copy of each message on its way into the stream): at the default 100 the
// collector takes a large share of the CPU at peak, and 200 carries more
// deliveries/s (docs/benchmarks.md has the figures), for a heap of up to
// three times the live one instead of two.
const gcPercent = 200

// memoryLimitShare of the container's memory limit becomes the soft memory
// limit unless GOMEMLIMIT is set: near it the collector runs as often as it
// must, so the larger heap never gets the container killed.
const memoryLimitShare = 0.8

// runtimeSettings are what tuneRuntime set, for the start-up log; zero
// where the environment's own GOGC or GOMEMLIMIT was kept.
type runtimeSettings struct {
	GCPercent   int
	MemoryLimit int64
}

// tuneRuntime applies the receiver binary's runtime settings (Run does, the
// load generator too; tests running receivers in process do not).
func tuneRuntime(getenv func(string) string) runtimeSettings {
	var s runtimeSettings
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
		s.GCPercent = gcPercent
	}
	if getenv("GOMEMLIMIT") == "" {
		if limit, ok := cgroupMemoryLimit(); ok {
			s.MemoryLimit = int64(float64(limit) * memoryLimitShare)
			debug.SetMemoryLimit(s.MemoryLimit)
		}
	}
	return s
}

// cgroupMemoryLimit is this process's container memory limit, cgroup v2 or
// v1; false when there is none.
func cgroupMemoryLimit() (int64, bool) {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(path); err == nil {
			return parseMemoryLimit(string(b))
		}
	}
	return 0, false
}

// parseMemoryLimit reads a cgroup memory limit file: a number of bytes, or
// "max" (v2) or a value near the int64 maximum (v1) for no limit.
func parseMemoryLimit(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0, false
	}
	return n, true
}
