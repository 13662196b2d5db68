// Package proccpu reads how much CPU a process has used, from /proc, for
// the benchmarks that report CPU per page beside their rates (the sink's
// own, and ClickHouse's when the benchmark started it): on a shared
// machine CPU-seconds compare across runs where rates do not.
package proccpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Seconds is the user and system CPU-seconds of the process pid so far,
// 0 when it cannot be read (no such process, not Linux).
func Seconds(pid int) float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// the last ')'. utime and stime are fields 14 and 15, in clock ticks
	// (USER_HZ, 100 on Linux).
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

// WithChildren is Seconds of pid plus that of its children still running
// (scripts/clickhouse.sh's launcher runs the server as its child).
func WithChildren(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	total := Seconds(pid)
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		kids, _ := os.ReadFile(t)
		for _, k := range strings.Fields(string(kids)) {
			if kid, err := strconv.Atoi(k); err == nil {
				total += Seconds(kid)
			}
		}
	}
	return total
}
