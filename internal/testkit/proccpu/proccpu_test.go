package proccpu

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSpent burns CPU in this process and finds it in what its threads
// spent meanwhile, under the thread names the kernel reports.
func TestSpent(t *testing.T) {
	threads0, before := Threads(os.Getpid()), Seconds(os.Getpid())
	x := 0
	for Seconds(os.Getpid()) < before+0.5 {
		for i := range 1_000_000 {
			x += i
		}
	}
	_ = x
	by, spent := Spent(threads0, Threads(os.Getpid())), Seconds(os.Getpid())-before
	var sum float64
	for _, s := range by {
		sum += s
	}
	// The threads hold nearly what this test burnt (each thread's figure
	// is counted in clock ticks), and no more than the process spent.
	if sum < 0.4 || sum > spent+0.02 {
		t.Fatalf("threads spent %.2f s, the process %.2f s: want at least 0.40 and at most the process's", sum, spent)
	}
	// The main thread carries the executable's name (truncated to 15 bytes).
	name := filepath.Base(os.Args[0])
	if len(name) > 15 {
		name = name[:15]
	}
	if _, ok := by[name]; !ok {
		t.Fatalf("no thread named %q among %v", name, by)
	}
}
