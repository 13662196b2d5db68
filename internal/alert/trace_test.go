package alert_test

import (
	"context"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/alert"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestAlertSpan: an alert sent makes one "alert" span naming the crawl, the
// failures counted and the outcome (sent, after the webhook's one retry).
func TestAlertSpan(t *testing.T) {
	t.Parallel()
	wd := newWorld(t)
	h := newHook(t)
	cfg := alert.Config{WebhookURL: h.URL, Threshold: 1, Window: time.Hour}
	claims := wd.claims(t, cfg.Window)
	a, err := alert.New(cfg, wd.w, claims, wd.nc, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	a.Tracer = tp.Tracer("test")
	a.RetryDelay, a.CheckEvery = 10*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	crawl := uuid.New()
	wd.fail(t, a, crawl, uuid.New(), "https://x.test/1", time.Now())
	waitFor(t, "the alert span", func() bool { return len(spans.GetSpans()) == 1 })
	s := spans.GetSpans()[0]
	got := map[string]string{}
	for _, kv := range s.Attributes {
		got[string(kv.Key)] = kv.Value.String()
	}
	if s.Name != "alert" || got["crawlhouse.crawl_id"] != crawl.String() || got["crawlhouse.outcome"] != "sent" || got["crawlhouse.failures"] != "1" {
		t.Errorf("span %s %v; want alert for crawl %s, 1 failure, sent", s.Name, got, crawl)
	}
	if len(h.posted()) != 1 {
		t.Errorf("%d alerts posted, want 1", len(h.posted()))
	}
}
