package backfill

import (
	"context"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestBackfillRunSpan: a run makes one "backfill run" span with the crawl,
// the job kind, the counts and the state it ended in.
func TestBackfillRunSpan(t *testing.T) {
	t.Parallel()
	r := newRig(t, crawlsim.APIOptions{PageDocs: 9})
	c := r.newCrawl(crawlsim.Options{Pages: 20})
	c.Finish(crawlapi.StatusCompleted)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	rec, _ := r.reconciler("replica-1", nil, ReconcilerConfig{Tracer: tp.Tracer("test")})
	res, err := rec.Reconcile(context.Background(), c.ID, false)
	if err != nil || res.State != StateDone || res.Inserted != 20 {
		t.Fatalf("run %+v %v", res, err)
	}
	got := spans.GetSpans()
	if len(got) != 1 || got[0].Name != "backfill run" {
		t.Fatalf("spans %v, want one backfill run", got)
	}
	attrs := map[string]string{}
	for _, kv := range got[0].Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, want := range map[string]string{
		"crawlhouse.crawl_id": c.ID, "crawlhouse.outcome": StateDone, "crawlhouse.job_kind": events.KindCrawl,
		"crawlhouse.fetched": "20", "crawlhouse.inserted": "20", "crawlhouse.present": "0",
	} {
		if attrs[k] != want {
			t.Errorf("%s = %q, want %q", k, attrs[k], want)
		}
	}
}
