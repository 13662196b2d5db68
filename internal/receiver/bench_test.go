package receiver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/verify"
)

// BenchmarkDelivery is one signed ~5 KB delivery through the handler over
// loopback keep-alive connections, as the load generator sends them:
// "jetstream" stores it in an embedded JetStream and answers after the
// PubAck; "floor" acknowledges at once, leaving the receiver's own work
// (read, signature, validation, envelope, answer). cpu-us/op is the CPU
// time of the whole test process (the clients' too) per delivery: on a
// shared machine it compares within one run where ns/op does not. Run with
// -cpuprofile to see where a delivery's microseconds go.
func BenchmarkDelivery(b *testing.B) {
	b.Run("floor", func(b *testing.B) {
		var seq atomic.Uint64
		s := startServer(b, map[string]string{"LOG_LEVEL": "warn"}, func(Publisher) Publisher {
			return publisherFunc(func(context.Context, *delivery.Envelope) (stream.Ack, error) {
				return stream.Ack{Sequence: seq.Add(1)}, nil
			})
		})
		benchDeliveries(b, s)
	})
	b.Run("jetstream", func(b *testing.B) {
		benchDeliveries(b, startServer(b, map[string]string{"LOG_LEVEL": "warn"}))
	})
}

func benchDeliveries(b *testing.B, s *testServer) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	markdown := strings.Repeat("All work and no play makes Jack a dull boy. ", 100)
	b.ReportAllocs()
	b.SetParallelism(16)
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body, _ := page(b, markdown) // a new webhookId: stored, not a duplicate
			req, err := http.NewRequest(http.MethodPost, s.URL+"/webhooks/crawl", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(verify.FirecrawlHeader, verify.Header(testSecret, body))
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
