package receivercmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/verify"
	"github.com/nats-io/nats.go/jetstream"
)

// TestPartitionedStreams: with NATS_STREAM_PARTITIONS=3 the receiver
// creates the three partitions' streams (and no unpartitioned one), is
// ready once they exist, and stores a delivery in its job's partition only,
// under that partition's subject.
func TestPartitionedStreams(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, true)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "NATS_STREAM_PARTITIONS": "3"})
	client := js.client(t)
	body, sig := fixture(t, "crawl-page.json")
	if a := r.post(t, body, verify.DefaultHeader, sig); a.status != http.StatusOK {
		t.Fatalf("delivery answered %d %s", a.status, a.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lane := stream.LaneOf("5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c", 3)
	for i := range 3 {
		s, err := client.Stream(ctx, fmt.Sprintf("CRAWL_EVENTS_%d", i))
		if err != nil {
			t.Fatalf("partition %d: %v", i, err)
		}
		want := uint64(0)
		if i == lane {
			want = 1
		}
		if n := s.CachedInfo().State.Msgs; n != want {
			t.Errorf("partition %d holds %d deliveries, want %d", i, n, want)
		}
	}
	s, _ := client.Stream(ctx, fmt.Sprintf("CRAWL_EVENTS_%d", lane))
	if _, err := s.GetLastMsgForSubject(ctx, fmt.Sprintf("crawl.events-%d.crawl.page", lane)); err != nil {
		t.Errorf("the delivery is not under its partition's subject: %v", err)
	}
	if _, err := client.Stream(ctx, "CRAWL_EVENTS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("the unpartitioned stream: %v, want none", err)
	}
}
