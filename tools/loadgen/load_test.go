package main

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// stallClient acknowledges at once, except one send that takes stall.
type stallClient struct {
	n       atomic.Int64
	stallAt int64
	stall   time.Duration
}

func (c *stallClient) send() bool {
	if c.n.Add(1) == c.stallAt {
		time.Sleep(c.stall)
	}
	return true
}

func (c *stallClient) usable() bool { return true }

// TestLoadOpenLoopCountsStalls: in the open loop, a stall of the only
// client delays the sends scheduled behind it, and their latency counts
// from their scheduled start (no coordinated omission): the p99 shows the
// stall although a single send was slow.
func TestLoadOpenLoopCountsStalls(t *testing.T) {
	c := &stallClient{stallAt: 50, stall: 40 * time.Millisecond}
	r := load(context.Background(), []client{c}, 400*time.Millisecond, 1000)
	if r.errors != 0 || len(r.latencies) < 300 {
		t.Fatalf("%d sends, %d errors; want about 400 and none", len(r.latencies), r.errors)
	}
	slices.Sort(r.latencies)
	// About 40 sends were scheduled during the stall; each waited for it.
	if delayed := len(r.latencies) - slices.IndexFunc(r.latencies, func(d time.Duration) bool { return d >= 10*time.Millisecond }); delayed < 20 {
		t.Fatalf("only %d sends show the 40ms stall; latencies must count from the scheduled start", delayed)
	}
}

// TestLoadClosedLoop: each client sends back to back; the rate is what
// was acknowledged per second.
func TestLoadClosedLoop(t *testing.T) {
	clients := []client{&stallClient{}, &stallClient{}}
	r := load(context.Background(), clients, 100*time.Millisecond, 0)
	sent := clients[0].(*stallClient).n.Load() + clients[1].(*stallClient).n.Load()
	if int64(len(r.latencies)) != sent || r.rate < float64(sent)/0.2 {
		t.Fatalf("%d latencies for %d sends, rate %.0f/s", len(r.latencies), sent, r.rate)
	}
}

func TestMedianAndMerge(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Fatalf("median %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("median %v", m)
	}
	m := merge([]result{{rate: 10, latencies: []time.Duration{1}}, {rate: 30, latencies: []time.Duration{2, 3}, errors: 1}, {rate: 20}})
	if m.rate != 20 || len(m.latencies) != 3 || m.errors != 1 {
		t.Fatalf("merge: %+v", m)
	}
}
