package backfill

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
)

const crawlA = "11111111-2222-4333-8444-555555555555"

func TestKVLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := startJetStream(t)
	clock := newFakeClock()
	one := newKVStore(t, js.connect(t), clock.now)
	two := newKVStore(t, js.connect(t), clock.now)

	l1, rec, err := one.Acquire(ctx, crawlA, "replica-1", time.Minute)
	if err != nil || rec.State != StatePending {
		t.Fatalf("acquire: %v %+v", err, rec)
	}
	if _, _, err := two.Acquire(ctx, crawlA, "replica-2", time.Minute); !errors.Is(err, ErrLeased) {
		t.Fatalf("second replica: %v", err)
	}
	rec.Cursor, rec.State = "/v2/crawl/x?skip=10", StateRunning
	if err := one.Save(ctx, l1, rec, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The holder stops renewing (it died): once the lease expires another
	// replica takes over, and the old holder's writes are refused.
	clock.add(61 * time.Second)
	l2, rec2, err := two.Acquire(ctx, crawlA, "replica-2", time.Minute)
	if err != nil || rec2.Cursor != "/v2/crawl/x?skip=10" {
		t.Fatalf("takeover: %v %+v", err, rec2)
	}
	if err := one.Save(ctx, l1, rec, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale holder saved: %v", err)
	}
	rec2.State = StateDone
	if err := two.Release(ctx, l2, rec2); err != nil {
		t.Fatal(err)
	}
	got, ok, err := one.Get(ctx, crawlA)
	if err != nil || !ok || got.Owner != "" || got.State != StateDone || !got.UpdatedAt.Equal(clock.now()) {
		t.Fatalf("after release: %v %+v", err, got)
	}
	// Released: anyone may take it at once.
	if _, _, err := one.Acquire(ctx, crawlA, "replica-1", time.Minute); err != nil {
		t.Fatal(err)
	}
}

func TestKVLeaseRace(t *testing.T) {
	t.Parallel()
	js := startJetStream(t)
	stores := make([]*KVStore, 6)
	for i := range stores {
		stores[i] = newKVStore(t, js.connect(t), nil)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.Acquire(context.Background(), crawlA, "replica-"+string(rune('a'+i)), time.Minute)
			if err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			} else if !errors.Is(err, ErrLeased) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d replicas hold the lease", won)
	}
}

// Records survive a restart of the JetStream server; Touch never overwrites
// a record.
func TestKVStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := startJetStream(t)
	s := newKVStore(t, js.connect(t), nil)
	const crawlB = "21111111-2222-4333-8444-555555555555"
	l, rec, err := s.Acquire(ctx, crawlA, "r", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rec.State, rec.Cursor, rec.Inserted = StateScraping, "/v2/crawl/a?skip=5", 5
	if err := s.Release(ctx, l, rec); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	if err := s.Touch(ctx, crawlB, events.KindCrawl, due); err != nil {
		t.Fatal(err)
	}
	if err := s.Touch(ctx, crawlA, events.KindCrawl, due); err != nil {
		t.Fatal(err)
	}

	js.restart(t)
	s = newKVStore(t, js.connect(t), nil)
	recs, err := s.List(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("list: %v %+v", err, recs)
	}
	got := map[string]Record{}
	for _, r := range recs {
		got[r.CrawlID] = r
	}
	if a := got[crawlA]; a.State != StateScraping || a.Cursor != "/v2/crawl/a?skip=5" || a.Inserted != 5 {
		t.Fatalf("crawl A after restart: %+v", a)
	}
	if b := got[crawlB]; b.State != StatePending || !b.DueAt.Equal(due) {
		t.Fatalf("crawl B after restart: %+v", b)
	}
}
