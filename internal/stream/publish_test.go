package stream

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startJetStream starts JetStream in the test process (syncing always, as
// the receiver's embedded server does) and connects to it with the stream
// and object store ensured; all of it is closed when the test ends.
func startJetStream(t *testing.T) (*server.Server, *nats.Conn, jetstream.JetStream, Config) {
	t.Helper()
	cfg := Config{URL: "nats://127.0.0.1:-1", Stream: "TEST_EVENTS", SubjectPrefix: "crawl.events",
		DedupWindow: time.Minute, MaxAge: time.Hour, Replicas: 1}
	srv, err := StartEmbedded(cfg, EmbeddedConfig{StoreDir: t.TempDir(), SyncAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	cfg.URL = srv.ClientURL()
	nc, js := connectJS(t, cfg.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	return srv, nc, js, cfg
}

// connectJS connects to url with opts and returns the connection and its
// JetStream context, closed when the test ends.
func connectJS(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func envelope(t *testing.T, cfg Config, body []byte) *delivery.Envelope {
	t.Helper()
	return delivery.NewEnvelope(cfg.SubjectPrefix, events.Head{Type: "crawl.page", CrawlID: uuid.NewString(), WebhookID: uuid.NewString()}, body, time.Now())
}

func randomBody(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return []byte(base64.StdEncoding.EncodeToString(b))[:n]
}

// TestPublishBodies: small bodies travel as they are, large compressible
// ones compressed, large incompressible ones in the object store; the
// body store opens each intact.
func TestPublishBodies(t *testing.T) {
	t.Parallel()
	_, nc, js, cfg := startJetStream(t)
	p := NewPublisher(nc, js, cfg, PublisherOptions{})
	defer p.Close()
	s, err := js.Stream(context.Background(), cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		body     []byte
		encoding string
		ref      bool
	}{
		{"small", []byte(`{"success":true}`), "", false},
		{"just fits", bytes.Repeat([]byte("a"), p.MaxBody()), "", false},
		{"2MB text", []byte(strings.Repeat("crawlhouse keeps every page. ", 2<<20/29)), delivery.EncodingZstd, false},
		{"5MB random", randomBody(5 << 20), "", true},
		{"5MB half random", append(randomBody(5<<20), bytes.Repeat([]byte("x"), 5<<20)...), delivery.EncodingZstd, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			env := envelope(t, cfg, tc.body)
			ack, err := p.Publish(ctx, env)
			if err != nil || ack.Duplicate {
				t.Fatalf("Publish: %+v %v", ack, err)
			}
			raw, err := s.GetMsg(ctx, ack.Sequence)
			if err != nil {
				t.Fatal(err)
			}
			got, err := delivery.Decode(raw.Subject, raw.Header, raw.Data)
			if err != nil {
				t.Fatal(err)
			}
			if got.Encoding != tc.encoding || (got.BodyRef != "") != tc.ref {
				t.Errorf("encoding %q ref %q, want %q ref=%v", got.Encoding, got.BodyRef, tc.encoding, tc.ref)
			}
			body, err := delivery.NewBodies(js, cfg.BodyBucket()).Open(ctx, got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(body, tc.body) {
				t.Errorf("Body returned %d bytes, want the %d published", len(body), len(tc.body))
			}
		})
	}
}

// TestPublishDuplicate: a second publish with the same webhookId stores
// nothing and says so, with the first copy's sequence.
func TestPublishDuplicate(t *testing.T) {
	t.Parallel()
	_, nc, js, cfg := startJetStream(t)
	for _, group := range []bool{false, true} {
		p := NewPublisher(nc, js, cfg, PublisherOptions{GroupCommit: group})
		env := envelope(t, cfg, []byte(`{}`))
		again := *env
		first, err := p.Publish(context.Background(), env)
		if err != nil {
			t.Fatal(err)
		}
		second, err := p.Publish(context.Background(), &again)
		if err != nil {
			t.Fatal(err)
		}
		if first.Duplicate || !second.Duplicate || second.Sequence != first.Sequence {
			t.Errorf("group=%v: first %+v, second %+v", group, first, second)
		}
		p.Close()
	}
}

// TestGroupCommit: concurrent publishes share atomic batches; each gets its
// own sequence; duplicates inside a batch are answered one by one.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	_, nc, js, cfg := startJetStream(t)
	p := NewPublisher(nc, js, cfg, PublisherOptions{GroupCommit: true, MaxBatch: 64})
	defer p.Close()
	const n = 300
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	acks := make([]Ack, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := delivery.NewEnvelope(cfg.SubjectPrefix, events.Head{Type: "crawl.page", CrawlID: ids[0], WebhookID: ids[i%n]}, []byte(ids[i%n]), time.Now())
			ack, err := p.Publish(context.Background(), env)
			if err != nil {
				t.Error(err)
			}
			acks[i] = ack
		}()
	}
	wg.Wait()
	seqs := map[uint64]bool{}
	for i := range n {
		a, b := acks[i], acks[i+n]
		if a.Duplicate == b.Duplicate || a.Sequence != b.Sequence {
			t.Errorf("%s: %+v and %+v", ids[i], a, b)
		}
		if seqs[a.Sequence] {
			t.Errorf("sequence %d given twice", a.Sequence)
		}
		seqs[a.Sequence] = true
	}
	s, _ := js.Stream(context.Background(), cfg.Stream)
	for seq := range seqs {
		msg, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if id := msg.Header.Get(delivery.HeaderMsgID); string(msg.Data) != id {
			t.Errorf("sequence %d holds %s, body %s", seq, id, msg.Data)
		}
	}
	if info, _ := s.Info(context.Background()); info.State.Msgs != n {
		t.Errorf("stream holds %d, want %d", info.State.Msgs, n)
	}
}

// TestGroupCommitBatches: many publishes waiting at once are stored in
// atomic batches; publishes that come one at a time never wait for a batch.
func TestGroupCommitBatches(t *testing.T) {
	t.Parallel()
	_, nc, js, cfg := startJetStream(t)
	p := NewPublisher(nc, js, cfg, PublisherOptions{GroupCommit: true, MaxBatch: 64, MinBatch: 8})
	defer p.Close()
	publish := func() {
		id := uuid.NewString()
		env := delivery.NewEnvelope(cfg.SubjectPrefix, events.Head{Type: "crawl.page", CrawlID: id, WebhookID: id}, []byte(id), time.Now())
		if ack, err := p.Publish(context.Background(), env); err != nil || ack.Duplicate {
			t.Errorf("%+v, %v", ack, err)
		}
	}
	for range 20 {
		publish()
	}
	if n := p.batcher.committed.Load(); n != 0 {
		t.Fatalf("%d atomic batches for publishes made one at a time", n)
	}
	var wg sync.WaitGroup
	for range 400 {
		wg.Go(publish)
	}
	wg.Wait()
	if n := p.batcher.committed.Load(); n == 0 {
		t.Fatal("400 concurrent publishes formed no atomic batch")
	}
	s, _ := js.Stream(context.Background(), cfg.Stream)
	if info, _ := s.Info(context.Background()); info.State.Msgs != 420 {
		t.Errorf("stream holds %d, want 420", info.State.Msgs)
	}
}

// TestPublishUnavailable: with the server gone, Publish fails at once with
// ErrUnavailable.
func TestPublishUnavailable(t *testing.T) {
	t.Parallel()
	srv, _, _, cfg := startJetStream(t)
	nc, err := nats.Connect(cfg.URL, nats.ReconnectBufSize(-1), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	p := NewPublisher(nc, js, cfg, PublisherOptions{})
	srv.Shutdown()
	srv.WaitForShutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := p.Publish(ctx, envelope(t, cfg, []byte(`{}`))); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Publish = %v, want ErrUnavailable", err)
	}
}

func TestListenAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		host string
		port int
	}{
		{"nats://127.0.0.1:4222", "127.0.0.1", 4222},
		{"nats://127.0.0.1:-1", "127.0.0.1", -1},
		{"nats://0.0.0.0:0", "0.0.0.0", -1},
		{"nats://user:pw@localhost:5222,nats://other:4222", "localhost", 5222},
		{"127.0.0.1:7422", "127.0.0.1", 7422},
		{"nats://localhost", "localhost", 4222},
	} {
		host, port, err := listenAddr(tc.url)
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("listenAddr(%q) = %q %d %v", tc.url, host, port, err)
		}
	}
	if _, _, err := listenAddr("nats://h:x"); err == nil {
		t.Error("a non-numeric port passed")
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	good := Config{URL: "nats://x:4222", Stream: "S", SubjectPrefix: "crawl.events", DedupWindow: time.Minute, MaxAge: time.Hour, Replicas: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Config){
		"NATS_STREAM":            func(c *Config) { c.Stream = "a.b" },
		"NATS_SUBJECT_PREFIX":    func(c *Config) { c.SubjectPrefix = "a.*" },
		"NATS_DEDUP_WINDOW":      func(c *Config) { c.DedupWindow = 0 },
		"NATS_MAX_AGE":           func(c *Config) { c.MaxAge = time.Second },
		"NATS_REPLICAS":          func(c *Config) { c.Replicas = 0 },
		"NATS_URL":               func(c *Config) { c.URL = " " },
		"NATS_STREAM_PARTITIONS": func(c *Config) { c.Partitions = MaxPartitions + 1 },
	} {
		c := good
		mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPublishNoStream: a subject no stream listens on is answered by the
// server's no-responders status, which fails the publish with
// ErrUnavailable before its deadline, and the next publish to the stream
// gets its own PubAck.
func TestPublishNoStream(t *testing.T) {
	t.Parallel()
	_, nc, js, cfg := startJetStream(t)
	p := NewPublisher(nc, js, cfg, PublisherOptions{})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	other := cfg
	other.SubjectPrefix = "nobody.listens"
	_, err := p.Publish(ctx, envelope(t, other, []byte(`{}`)))
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("Publish to a subject without a stream = %v, want ErrUnavailable and no responders", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the publish waited for its deadline instead of the server's answer")
	}
	ack, err := p.Publish(ctx, envelope(t, cfg, []byte(`{}`)))
	if err != nil || ack.Sequence != 1 || ack.Duplicate {
		t.Fatalf("Publish after it = %+v, %v; want sequence 1, not a duplicate", ack, err)
	}
}

// TestPublishLateAck: a publish that gave up before its PubAck came does
// not leave that PubAck to the next publish: every later publish gets the
// sequence of its own message.
func TestPublishLateAck(t *testing.T) {
	t.Parallel()
	_, nc, js, cfg := startJetStream(t)
	p := NewPublisher(nc, js, cfg, PublisherOptions{})
	defer p.Close()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Publish(gone, envelope(t, cfg, []byte(`{}`))); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Publish with a done context = %v, want ErrUnavailable", err)
	}
	ctx, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	// The abandoned message may or may not have been stored (sequence 1):
	// each later publish must be told the sequence its own message got.
	s, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		env := envelope(t, cfg, []byte(`{}`))
		ack, err := p.Publish(ctx, env)
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		msg, err := s.GetMsg(ctx, ack.Sequence)
		if err != nil {
			t.Fatalf("publish %d: message %d: %v", i, ack.Sequence, err)
		}
		if got := msg.Header.Get(delivery.HeaderMsgID); got != env.WebhookID || ack.Duplicate {
			t.Fatalf("publish %d: ack %+v names message %q, want %q", i, ack, got, env.WebhookID)
		}
	}
}

// TestParsePubAck: the server's answers are read as stored, duplicate or
// failed; anything the one-pass reader does not recognise goes through
// encoding/json, and malformed answers are errors, never a sequence.
func TestParsePubAck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		data    string
		want    Ack
		wantErr bool
	}{
		{`{"stream":"S","seq":7}`, Ack{Sequence: 7}, false},
		{`{"stream":"S","seq":7,"duplicate":true}`, Ack{Sequence: 7, Duplicate: true}, false},
		{`{"stream":"S","seq":7,"duplicate": true}`, Ack{Sequence: 7, Duplicate: true}, false},
		{`{"stream":"S","seq":7,"duplicate": false}`, Ack{Sequence: 7}, false},
		{`{"stream":"S","domain":"d","seq":18446744073709551615}`, Ack{Sequence: 18446744073709551615}, false},
		{`{"stream":"S \"seq\":9","seq":3}`, Ack{Sequence: 3}, false},
		{`{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"S","seq":0}`, Ack{}, true},
		{`{"stream":"S","seq":18446744073709551616}`, Ack{}, true},
		{`{"stream":"S","seq":0}`, Ack{}, true},
		{`{"stream":"S","seq":-1}`, Ack{}, true},
		{`{"stream":"S","seq":12`, Ack{}, true},
		{`{"stream":"S"}`, Ack{}, true},
		{`not json`, Ack{}, true},
		{`}`, Ack{}, true},
	}
	for _, c := range cases {
		got, err := parsePubAck(&nats.Msg{Data: []byte(c.data)})
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("parsePubAck(%s) = %+v, %v; want %+v, error %v", c.data, got, err, c.want, c.wantErr)
		}
	}
	status := &nats.Msg{Header: nats.Header{"Status": {"503"}}}
	if _, err := parsePubAck(status); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("status 503 = %v, want no responders", err)
	}
	if _, err := parsePubAck(&nats.Msg{}); err == nil {
		t.Error("an empty answer was read as a PubAck")
	}
}

// TestPublishWriteGroup: on a connection whose publishes share their
// writes, concurrent publishes each get the PubAck of their own message,
// the stream holds every one, and the connection's own writes (a PING)
// still go out; after the server restarts, publishes are stored again.
func TestPublishWriteGroup(t *testing.T) {
	t.Parallel()
	srv, _, js0, cfg := startJetStream(t)
	nc, p := groupPublisher(t, cfg, NewWriteGroup(2*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := js0.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	const n = 256
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if i%32 == 0 {
				// A write of the connection's own, among the publishes.
				if _, err := nc.RTT(); err != nil {
					errs <- fmt.Errorf("RTT: %w", err)
				}
			}
			env := envelope(t, cfg, randomBody(5000))
			ack, err := p.Publish(ctx, env)
			if err != nil {
				errs <- err
				return
			}
			msg, err := s.GetMsg(ctx, ack.Sequence)
			if err != nil {
				errs <- err
				return
			}
			if got := msg.Header.Get(delivery.HeaderMsgID); got != env.WebhookID || ack.Duplicate {
				errs <- fmt.Errorf("ack %+v names message %q, want %q", ack, got, env.WebhookID)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Errorf("stream holds %d messages, want %d", info.State.Msgs, n)
	}

	// The server goes away: a publish fails (not connected, or its write
	// lost), and once the server is back on the same address and store,
	// publishes are stored again on the new connection.
	dir := srv.StoreDir()
	srv.Shutdown()
	srv.WaitForShutdown()
	down, cancelDown := context.WithTimeout(ctx, 2*time.Second)
	_, err = p.Publish(down, envelope(t, cfg, randomBody(100)))
	cancelDown()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("publish with the server down = %v, want ErrUnavailable", err)
	}
	srv2, err := StartEmbedded(cfg, EmbeddedConfig{StoreDir: dir, SyncAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv2.Shutdown(); srv2.WaitForShutdown() })
	for {
		if err := ctx.Err(); err != nil {
			t.Fatalf("no publish stored after the restart: %v", err)
		}
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		ack, err := p.Publish(attempt, envelope(t, cfg, randomBody(5000)))
		cancelAttempt()
		if err == nil {
			if ack.Sequence != n+1 {
				t.Errorf("after the restart: sequence %d, want %d", ack.Sequence, n+1)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}
