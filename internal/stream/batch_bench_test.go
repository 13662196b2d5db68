package stream

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkSyncAlways measures, on a server that syncs always, how fast
// 5 KB messages are stored: one by one from 64 concurrent publishers, and in
// atomic batches of several sizes (group commit). Run with
// go test -run '^$' -bench SyncAlways -benchtime 2000x ./internal/stream
func BenchmarkSyncAlways(b *testing.B) {
	for _, sync := range []bool{true, false} {
		b.Run(fmt.Sprintf("sync=%v/single", sync), func(b *testing.B) { benchPublish(b, sync, 1) })
		for _, n := range []int{8, 32, 128} {
			b.Run(fmt.Sprintf("sync=%v/batch=%d", sync, n), func(b *testing.B) { benchPublish(b, sync, n) })
		}
	}
}

func benchPublish(b *testing.B, syncAlways bool, batch int) {
	cfg := Config{URL: "nats://127.0.0.1:-1", Stream: "BENCH", SubjectPrefix: "bench", DedupWindow: 60e9, MaxAge: 3600e9, Replicas: 1}
	srv, err := StartEmbedded(cfg, EmbeddedConfig{StoreDir: b.TempDir(), SyncAlways: syncAlways})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateOrUpdateStream(ctx, EventsStreamConfig(cfg)); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 5000)
	workers := 64
	if batch > 1 {
		workers = maxInflightBatches
	}
	b.SetBytes(5000)
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N / workers / batch
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				id := uuid.NewString()
				for i := 1; i <= batch; i++ {
					m := &nats.Msg{Subject: "bench.x", Data: data, Header: nats.Header{"Nats-Msg-Id": {uuid.NewString()}}}
					if batch > 1 {
						m.Header.Set("Nats-Batch-Id", id)
						m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i))
						if i < batch {
							_ = nc.PublishMsg(m)
							continue
						}
						m.Header.Set("Nats-Batch-Commit", "1")
					}
					if _, err := js.PublishMsg(ctx, m); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(per*workers*batch)/b.Elapsed().Seconds(), "msgs/s")
}
