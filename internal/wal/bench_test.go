package wal

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/rs/zerolog"
)

// BenchmarkAppend128: 128 concurrent committers of ~5 KB deliveries, the
// log alone (WAL_BENCH_DIR picks the disk; the default temporary
// directory may be memory).
func BenchmarkAppend128(b *testing.B) {
	dir := os.Getenv("WAL_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	} else {
		d, err := os.MkdirTemp(dir, "walbench-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	w, err := Open(Options{Dir: dir, MaxBytes: 8 << 30, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	body := make([]byte, 5000)
	env := &delivery.Envelope{Subject: "crawl.events.crawl.page", WebhookID: "00000000-0000-4000-8000-000000000000", CrawlID: "c", Type: "crawl.page", Body: body}
	var wg sync.WaitGroup
	next := make(chan struct{})
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for range 128 {
		wg.Go(func() {
			for range next {
				if err := w.Append(env); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for range b.N {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
}

// BenchmarkAppend128Busy is BenchmarkAppend128 with the CPUs kept busy by
// 64 goroutines that spin in slices of ~50 µs, like HTTP handlers.
func BenchmarkAppend128Busy(b *testing.B) {
	stop := make(chan struct{})
	var spin sync.WaitGroup
	for range 64 {
		spin.Go(func() {
			x := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range 20000 {
					x += i
				}
				_ = x
				time.Sleep(50 * time.Microsecond)
			}
		})
	}
	defer func() { close(stop); spin.Wait() }()
	BenchmarkAppend128(b)
}
