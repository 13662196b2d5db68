package sink

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// fakeMsg is a JetStream message whose answers are recorded.
type fakeMsg struct {
	subject   string
	header    nats.Header
	data      []byte
	seq       uint64
	delivered uint64

	mu   sync.Mutex
	acks int
	naks []time.Duration // 0 for a Nak without delay
}

var _ jetstream.Msg = (*fakeMsg)(nil)

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Stream: "CRAWL_EVENTS", Sequence: jetstream.SequencePair{Stream: m.seq}, NumDelivered: m.delivered}, nil
}
func (m *fakeMsg) Data() []byte                    { return m.data }
func (m *fakeMsg) Headers() nats.Header            { return m.header }
func (m *fakeMsg) Subject() string                 { return m.subject }
func (m *fakeMsg) Reply() string                   { return "" }
func (m *fakeMsg) DoubleAck(context.Context) error { return m.Ack() }
func (m *fakeMsg) InProgress() error               { return nil }
func (m *fakeMsg) Term() error                     { return nil }
func (m *fakeMsg) TermWithReason(string) error     { return nil }
func (m *fakeMsg) Ack() error                      { m.mu.Lock(); defer m.mu.Unlock(); m.acks++; return nil }
func (m *fakeMsg) Nak() error                      { return m.NakWithDelay(0) }
func (m *fakeMsg) NakWithDelay(d time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.naks = append(m.naks, d)
	return nil
}

// fakeWriter is ClickHouse as the commit path sees it: each insert and
// ping is answered by the case's functions, given the attempt number.
type fakeWriter struct {
	mu       sync.Mutex
	inserts  int
	pings    int
	insertFn func(n int, urls []string) error
	pingFn   func(n int) error
	// batches are the URLs of every insert attempt, in order; archived
	// those of the successful ones.
	batches  [][]string
	archived []string
}

func (w *fakeWriter) Insert(_ context.Context, rows archive.Rows) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inserts++
	var urls []string
	for _, p := range rows.Pages {
		urls = append(urls, p.URL)
	}
	w.batches = append(w.batches, urls)
	if w.insertFn != nil {
		if err := w.insertFn(w.inserts, urls); err != nil {
			return err
		}
	}
	w.archived = append(w.archived, urls...)
	return nil
}

// PriorFailures finds nothing recorded: every failure is new.
func (w *fakeWriter) PriorFailures(_ context.Context, fs []archive.Failure) ([]archive.Prior, error) {
	return make([]archive.Prior, len(fs)), nil
}

func (w *fakeWriter) Ping(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pings++
	if w.pingFn == nil {
		return nil
	}
	return w.pingFn(w.pings)
}

func exception(code int32, name string) error {
	return fmt.Errorf("insert into pages: %w", &clickhouse.Exception{Code: code, Name: name, Message: name + " for this test"})
}

// failFor fails every insert holding url with err.
func failFor(url string, err error) func(int, []string) error {
	return func(_ int, urls []string) error {
		if slices.Contains(urls, url) {
			return err
		}
		return nil
	}
}

// TestCommitPath drives Consumer.commit with a fake ClickHouse and real
// JetStream for the dead letters: what is held, isolated, nak'ed with which
// delay, dead-lettered, and what the stall reports meanwhile.
func TestCommitPath(t *testing.T) {
	t.Parallel()
	const maxDeliver = 3
	memory := exception(241, "MEMORY_LIMIT_EXCEEDED")
	refused := exception(469, "VIOLATED_CONSTRAINT")
	down := fmt.Errorf("dial tcp 127.0.0.1:9000: %w", io.ErrUnexpectedEOF)
	type want struct {
		naks   map[string]time.Duration // URL → delay of its one nak
		dead   []string                 // URLs dead-lettered (and acked)
		sleeps int                      // holds between attempts
		stall  bool                     // the stall was reported while holding
		reason string                   // in the dead letter's reason
	}
	for _, tc := range []struct {
		name     string
		urls     []string
		tries    map[string]uint64 // deliveries so far, default 1
		suspects []string
		insertFn func(n int, urls []string) error
		pingFn   func(n int) error
		// cancelAt cancels the run's context at that hold (shutdown).
		cancelAt int
		want     want
	}{
		{
			name:     "outage holds until ClickHouse is back",
			urls:     []string{"a", "b", "c", "d", "e"},
			insertFn: func(n int, _ []string) error { return map[bool]error{true: down}[n <= 4] },
			pingFn:   func(n int) error { return map[bool]error{true: down}[n <= 4] },
			want:     want{sleeps: 4, stall: true},
		},
		{
			name: "try later holds for ever while ping fails, then isolates",
			urls: []string{"a", "b", "big", "c"},
			// ClickHouse answers again after 6 pings.
			insertFn: failFor("big", memory),
			pingFn:   func(n int) error { return map[bool]error{true: down}[n <= 6] },
			want:     want{sleeps: 6 + isolateAfter - 1, stall: true, naks: map[string]time.Duration{"big": time.Second}},
		},
		{
			name: "credentials hold even while ClickHouse answers",
			urls: []string{"a", "b", "c"},
			insertFn: func(n int, _ []string) error {
				return map[bool]error{true: exception(516, "AUTHENTICATION_FAILED")}[n <= 6]
			},
			want: want{sleeps: 6, stall: true},
		},
		{
			name:     "privileges hold",
			urls:     []string{"a", "b"},
			insertFn: func(n int, _ []string) error { return map[bool]error{true: exception(497, "ACCESS_DENIED")}[n <= 5] },
			want:     want{sleeps: 5, stall: true},
		},
		{
			name:     "refused message isolated, the rest archived",
			urls:     []string{"a", "b", "c", "bad", "d", "e", "f", "g"},
			insertFn: failFor("bad", refused),
			want:     want{naks: map[string]time.Duration{"bad": time.Second}},
		},
		{
			name:     "refused message backs off with its tries",
			urls:     []string{"a", "bad"},
			tries:    map[string]uint64{"bad": 2},
			insertFn: failFor("bad", refused),
			want:     want{naks: map[string]time.Duration{"bad": 2 * time.Second}},
		},
		{
			name:     "refused message dead-lettered at SINK_MAX_DELIVER",
			urls:     []string{"a", "bad", "b"},
			tries:    map[string]uint64{"bad": maxDeliver},
			insertFn: failFor("bad", refused),
			want:     want{dead: []string{"bad"}, reason: "VIOLATED_CONSTRAINT"},
		},
		{
			name:     "try later while ClickHouse answers: held a few times, then the culprit isolated",
			urls:     []string{"a", "b", "c", "d", "big", "e", "f", "g"},
			insertFn: failFor("big", memory),
			want:     want{sleeps: isolateAfter - 1, stall: true, naks: map[string]time.Duration{"big": time.Second}},
		},
		{
			name:     "try later culprit dead-lettered at SINK_MAX_DELIVER",
			urls:     []string{"a", "big", "b"},
			tries:    map[string]uint64{"big": maxDeliver},
			insertFn: failFor("big", memory),
			want:     want{sleeps: isolateAfter - 1, stall: true, dead: []string{"big"}, reason: "MEMORY_LIMIT_EXCEEDED"},
		},
		{
			name:     "a suspect back from its nak holds nothing up",
			urls:     []string{"a", "big", "b", "c"},
			tries:    map[string]uint64{"big": 2},
			suspects: []string{"big"},
			insertFn: failFor("big", memory),
			want:     want{naks: map[string]time.Duration{"big": 2 * time.Second}},
		},
		{
			name:     "shutdown while held hands the batch back at once",
			urls:     []string{"a", "b"},
			insertFn: func(int, []string) error { return down },
			pingFn:   func(int) error { return down },
			cancelAt: 2,
			want:     want{sleeps: 2, stall: true, naks: map[string]time.Duration{"a": 0, "b": 0}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			js := startJetStream(t)
			out := &logtest.Buffer{}
			w := &fakeWriter{insertFn: tc.insertFn, pingFn: tc.pingFn}
			c := testConsumer(t, js, w, maxDeliver, out)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sleeps, stalled := 0, false
			c.sleep = func(context.Context, time.Duration) {
				sleeps++
				if c.stall.Err() != nil && c.stall.stalled() == 1 {
					stalled = true
				}
				if sleeps == tc.cancelAt {
					cancel()
				}
			}
			msgs := map[string]*fakeMsg{}
			var ds []*decoded
			for i, u := range tc.urls {
				tries := tc.tries[u]
				if tries == 0 {
					tries = 1
				}
				d, m := testDelivery(u, uint64(i+1), tries)
				msgs[u] = m
				ds = append(ds, d)
				if slices.Contains(tc.suspects, u) {
					c.suspects[d.seq] = true
				}
			}
			c.commit(ctx, context.WithoutCancel(ctx), &batch{deliveries: ds})

			if sleeps != tc.want.sleeps {
				t.Errorf("held %d times, want %d", sleeps, tc.want.sleeps)
			}
			if stalled != tc.want.stall {
				t.Errorf("stall reported while holding: %v, want %v", stalled, tc.want.stall)
			}
			if c.stall.Err() != nil || c.stall.stalled() != 0 || c.stall.seconds() != 0 {
				t.Errorf("stall not cleared after the batch: %v", c.stall.Err())
			}
			for u, m := range msgs {
				delay, nakked := tc.want.naks[u]
				dead := slices.Contains(tc.want.dead, u)
				switch {
				case nakked:
					if m.acks != 0 || !slices.Equal(m.naks, []time.Duration{delay}) {
						t.Errorf("%s: acks %d naks %v, want one nak with delay %v", u, m.acks, m.naks, delay)
					}
				default: // archived or dead-lettered: acked once, never nak'ed
					if m.acks != 1 || len(m.naks) != 0 {
						t.Errorf("%s: acks %d naks %v, want one ack (dead-lettered: %v)", u, m.acks, m.naks, dead)
					}
				}
			}
			// What ClickHouse holds: every message neither nak'ed nor dead,
			// once.
			var wantArchived []string
			for _, u := range tc.urls {
				if _, nakked := tc.want.naks[u]; !nakked && !slices.Contains(tc.want.dead, u) {
					wantArchived = append(wantArchived, u)
				}
			}
			slices.Sort(w.archived)
			slices.Sort(wantArchived)
			if !slices.Equal(w.archived, wantArchived) {
				t.Errorf("archived %v, want %v", w.archived, wantArchived)
			}
			letters := readDeadLetters(t, js, testDLQ)
			var deadURLs []string
			for _, l := range letters {
				deadURLs = append(deadURLs, string(l.Data))
				if r := l.Header.Get(delivery.HeaderDLQReason); !strings.Contains(r, tc.want.reason) {
					t.Errorf("dead letter reason %q lacks %q", r, tc.want.reason)
				}
				if !strings.Contains(out.String(), `"message":"message dead-lettered"`) ||
					!strings.Contains(out.String(), `"webhook_id":"`+l.Header.Get(delivery.HeaderDLQMsgID)+`"`) {
					t.Errorf("dead letter not logged with its webhook id:\n%s", out)
				}
			}
			if !slices.Equal(deadURLs, tc.want.dead) {
				t.Errorf("dead letters %v, want %v", deadURLs, tc.want.dead)
			}
			if tc.want.naks["big"] > 0 && !c.suspects[msgs["big"].seq] {
				t.Error("the isolated message is not remembered as a suspect")
			}
			if len(tc.suspects) > 0 && slices.Contains(w.batches[0], "big") {
				t.Errorf("the suspect was inserted with the others: %v", w.batches)
			}
		})
	}
}

func startJetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	_, js := streamtest.Connect(t, streamtest.Start(t))
	return js
}

// testConsumer is a Consumer on w with its events stream, durable
// consumer and dead-letter stream in js.
func testConsumer(t *testing.T, js jetstream.JetStream, w BatchWriter, maxDeliver int, out io.Writer) *Consumer {
	t.Helper()
	eventsCfg := stream.Config{Stream: "CRAWL_EVENTS", SubjectPrefix: "crawl.events", DedupWindow: time.Minute, MaxAge: time.Hour, Replicas: 1}
	cfg := Config{Durable: "sink", FilterSubject: "crawl.events.>", BatchSize: 1000, BatchBytes: DefaultBatchBytes, BatchWait: time.Second,
		MaxDeliver: maxDeliver, AckWait: time.Minute, InsertsInFlight: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := stream.EnsureStream(ctx, js, eventsCfg); err != nil {
		t.Fatal(err)
	}
	src, err := js.CreateOrUpdateConsumer(ctx, eventsCfg.Stream, cfg.ConsumerConfig())
	if err != nil {
		t.Fatal(err)
	}
	dlq := stream.DeadLetterConfig{Stream: testDLQ, Events: eventsCfg}
	dl, err := delivery.NewDeadLetters(js, dlq.Route())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.EnsureDeadLetterStream(ctx, js, dlq); err != nil {
		t.Fatal(err)
	}
	st := NewStall(nil)
	m, err := NewMetrics(prometheus.NewRegistry(), st)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConsumer(cfg, Deps{Source: src, Bodies: delivery.NewBodies(js, eventsCfg.BodyBucket()), DeadLetters: dl,
		Writer: w, Metrics: m, Stall: st, Log: zerolog.New(out)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testDLQ is the dead-letter stream of testConsumer.
const testDLQ = "CRAWL_DLQ"

// testDelivery is a decoded delivery of one page at url.
func testDelivery(url string, seq, tries uint64) (*decoded, *fakeMsg) {
	webhookID, crawlID := uuid.NewString(), uuid.NewString()
	m := &fakeMsg{
		subject: "crawl.events.crawl.page",
		header: nats.Header{
			delivery.HeaderMsgID:   {webhookID},
			delivery.HeaderCrawlID: {crawlID},
		},
		data: []byte(url), seq: seq, delivered: tries,
	}
	return &decoded{
		msg: m, tries: tries, seq: seq,
		env:  &delivery.Envelope{WebhookID: webhookID, CrawlID: crawlID, Type: "crawl.page"},
		rows: archive.Rows{Pages: []archive.Page{{URL: url}}},
	}, m
}

// readDeadLetters returns the messages of the dead-letter stream.
func readDeadLetters(t *testing.T, js jetstream.JetStream, name string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		out = append(out, m)
	}
	return out
}
