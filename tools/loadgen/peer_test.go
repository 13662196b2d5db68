package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"

	"github.com/nats-io/nats.go/jetstream"
)

// TestPeersAnswerBeforeAndAfterThePubAck: the acked peer answers 200 only
// once JetStream stored the message (it is in the stream when the answer
// comes, and with no stream on the subject it refuses), while the other
// peer answers 200 whether or not anything stored it. The benchmark's two
// comparisons rest on that difference.
func TestPeersAnswerBeforeAndAfterThePubAck(t *testing.T) {
	url := streamtest.Start(t)
	_, js := streamtest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
	if err != nil {
		t.Fatal(err)
	}
	start := func(subject string, acked bool) string {
		p, err := startPeer(url, subject, acked)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.close)
		return "http://" + p.addr + "/"
	}
	post := func(url string) int {
		resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(`{"page":1}`)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	for i := 1; i <= 3; i++ {
		if code := post(start("ev.page", true)); code != http.StatusOK {
			t.Fatalf("acked peer answered %d with a stream on the subject, want 200", code)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != uint64(i) {
			t.Fatalf("acked peer answered 200 with %d messages in the stream, want %d: it answered before the PubAck", info.State.Msgs, i)
		}
	}
	if code := post(start("nowhere.page", true)); code == http.StatusOK {
		t.Fatal("acked peer answered 200 with no stream on the subject: it does not wait for the PubAck")
	}
	if code := post(start("nowhere.page", false)); code != http.StatusOK {
		t.Fatalf("peer answered %d with no stream on the subject, want 200: it answers before the PubAck", code)
	}
}
