package proccpu

import (
	"os"
	"path/filepath"
	"syscall"
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

// TestMinorFaults touches memory this process never touched and finds at
// least a fault for each of its pages.
func TestMinorFaults(t *testing.T) {
	const size = 64 << 20
	before := MinorFaults(os.Getpid())
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Munmap(b) }()
	page := os.Getpagesize()
	for i := 0; i < size; i += page {
		b[i] = 1
	}
	// Transparent huge pages may back the mapping with fewer, larger
	// pages; at least one fault per 2 MiB is always taken.
	if got := MinorFaults(os.Getpid()) - before; got < size/(2<<20) {
		t.Fatalf("%d minor faults for %d MiB never touched before, want at least %d", got, size>>20, size/(2<<20))
	}
	if MinorFaults(-1) != 0 {
		t.Fatal("a process that does not exist has faults")
	}
}
