package receiver

import (
	"errors"
	"net/http"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
)

// TestQuarantineQueueKeepsClassesApart: forged deliveries (class
// unverified) that fill the in-memory queue, as a flood does while the
// writer is busy, do not make an authenticated-but-invalid delivery drop:
// each class waits in a queue of its own, and the invalid one is written
// first. The writer is not running, so the queue is as full as a flood
// faster than JetStream leaves it.
func TestQuarantineQueueKeepsClassesApart(t *testing.T) {
	const queueBytes = 4096
	q := newQuarantine(QuarantineConfig{Quarantine: true, QuarantineStreams: stream.QuarantineStreams{QuarantineStream: "Q"}, QuarantineQueueBytes: queueBytes},
		1, zerolog.Nop(), prometheus.NewRegistry())
	forged := make([]byte, 512)
	for i := 0; i < 2*queueBytes/len(forged); i++ {
		q.keep(ClassUnverified, http.Header{}, nil, forged, "127.0.0.9", authNone, errors.New("mismatch"))
	}
	if got := testutil.ToFloat64(q.dropped.WithLabelValues(ClassUnverified, dropQueueFull)); got == 0 {
		t.Fatalf("the forged deliveries did not fill the queue: nothing dropped")
	}
	invalid := []byte(`{"type":"crawl.page"}`)
	q.keep(ClassInvalid, http.Header{}, nil, invalid, "127.0.0.2", authSignature, errors.New("data: missing"))
	if got := testutil.ToFloat64(q.dropped.WithLabelValues(ClassInvalid, dropQueueFull)); got != 0 {
		t.Fatalf("an authenticated-but-invalid delivery was dropped (queue_full) behind %d bytes of forged ones", queueBytes)
	}
	if r := q.next(); r == nil || r.class != ClassInvalid || string(r.body) != string(invalid) {
		t.Fatalf("the first delivery the writer takes is %+v, want the invalid one", r)
	}
}
