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
	_, secs := stat(fmt.Sprintf("/proc/%d/stat", pid))
	return secs
}

// MinorFaults is how many minor page faults the process pid has taken so
// far (a page of memory it touched for the first time since the kernel
// gave it, or gave it back), 0 when it cannot be read. A Go process that
// returns its free heap to the kernel and allocates it again pays one per
// 4 KiB page, counted as CPU in whatever copied into it.
func MinorFaults(pid int) uint64 {
	// minflt is field 10, the eighth after the command name.
	_, f := statFields(fmt.Sprintf("/proc/%d/stat", pid))
	if len(f) < 8 {
		return 0
	}
	n, _ := strconv.ParseUint(f[7], 10, 64)
	return n
}

// stat reads a process's or a thread's stat file: its command name (a
// thread's name, for a task) and its user and system CPU-seconds.
func stat(path string) (name string, secs float64) {
	// utime and stime are fields 14 and 15, in clock ticks (USER_HZ, 100
	// on Linux).
	name, f := statFields(path)
	if len(f) < 13 {
		return "", 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return name, (u + s) / 100
}

// statFields reads a stat file: the command name and the fields after it
// (the first of them is field 3, the state), nil when it cannot be read.
// The name, in parentheses, may hold spaces: fields count from the last
// ')'.
func statFields(path string) (name string, fields []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil
	}
	open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
	if open < 0 || end < open {
		return "", nil
	}
	return string(b[open+1 : end]), strings.Fields(string(b[end+1:]))
}

// WithChildren is Seconds of pid plus that of its children still running
// (scripts/clickhouse.sh's launcher runs the server as its child).
func WithChildren(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	total := Seconds(pid)
	for _, kid := range children(pid) {
		total += Seconds(kid)
	}
	return total
}

// Thread is one thread's name and its user and system CPU-seconds so far.
type Thread struct {
	Name    string
	Seconds float64
}

// Threads reads the threads of pid and of its children still running, by
// thread id. ClickHouse names its threads by their work (MergeMutate for
// merges, TCPHandler for a native-protocol connection's queries and
// inserts), so Spent over two readings says what the server spent its
// CPU on in between.
func Threads(pid int) map[int]Thread {
	ts := map[int]Thread{}
	if pid <= 0 {
		return ts
	}
	for _, p := range append([]int{pid}, children(pid)...) {
		paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", p))
		for _, path := range paths {
			tid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			if name, secs := stat(path); err == nil && name != "" {
				ts[tid] = Thread{Name: name, Seconds: secs}
			}
		}
	}
	return ts
}

// Spent is the CPU-seconds each thread used between two readings of
// Threads, summed by the thread's name in the later one. A thread that
// ended in between is missing (compare the sum with WithChildren's
// difference).
func Spent(before, after map[int]Thread) map[string]float64 {
	by := map[string]float64{}
	for tid, t := range after {
		by[t.Name] += t.Seconds - before[tid].Seconds
	}
	return by
}

// children lists the processes pid started that are still running.
func children(pid int) []int {
	var kids []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, k := range strings.Fields(string(b)) {
			if kid, err := strconv.Atoi(k); err == nil {
				kids = append(kids, kid)
			}
		}
	}
	return kids
}
