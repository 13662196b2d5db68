package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// KVStore is a StateStore on a JetStream key-value bucket (the one
// stream.EnsureBackfillState creates, CRAWL_BACKFILL): one key per crawl
// (the crawl id), the Record as JSON. Every write is a compare-and-set on the
// key's revision (Create for a new key, Update with the revision read), so a
// lease taken by one replica makes another replica's concurrent write fail
// instead of overwriting it. Lease expiry is judged by each replica's clock
// against LeaseUntil; clocks need only agree within a fraction of the TTL.
type KVStore struct {
	kv  jetstream.KeyValue
	now func() time.Time
}

var _ StateStore = (*KVStore)(nil)

// NewKVStore returns the store on kv; now is the clock for leases (nil:
// time.Now).
func NewKVStore(kv jetstream.KeyValue, now func() time.Time) (*KVStore, error) {
	if kv == nil {
		return nil, errors.New("backfill: a state bucket is required")
	}
	if now == nil {
		now = time.Now
	}
	return &KVStore{kv: kv, now: now}, nil
}

func (s *KVStore) read(ctx context.Context, crawlID string) (Record, uint64, error) {
	e, err := s.kv.Get(ctx, crawlID)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Record{}, 0, nil
	}
	if err != nil {
		return Record{}, 0, fmt.Errorf("backfill state of %s: %w", crawlID, err)
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Record{}, 0, fmt.Errorf("backfill state of %s: %w", crawlID, err)
	}
	return r, e.Revision(), nil
}

// write stores rec with a compare-and-set on rev (0: the key must not
// exist). It returns the new revision; a conflict wraps
// jetstream.ErrKeyRevisionMismatch or jetstream.ErrKeyExists.
func (s *KVStore) write(ctx context.Context, rec Record, rev uint64) (uint64, error) {
	rec.UpdatedAt = s.now().UTC()
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		return s.kv.Create(ctx, rec.CrawlID, b)
	}
	return s.kv.Update(ctx, rec.CrawlID, b, rev)
}

func conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

// Get implements StateStore.
func (s *KVStore) Get(ctx context.Context, crawlID string) (Record, bool, error) {
	r, rev, err := s.read(ctx, crawlID)
	return r, rev != 0, err
}

// Acquire implements StateStore.
func (s *KVStore) Acquire(ctx context.Context, crawlID, owner string, ttl time.Duration) (*Lease, Record, error) {
	r, rev, err := s.read(ctx, crawlID)
	if err != nil {
		return nil, Record{}, err
	}
	now := s.now()
	if rev == 0 {
		r = Record{CrawlID: crawlID, State: StatePending}
	} else if r.Owner != "" && r.Owner != owner && now.Before(r.LeaseUntil) {
		return nil, r, fmt.Errorf("%w: %s until %s", ErrLeased, r.Owner, r.LeaseUntil.Format(time.RFC3339))
	}
	r.Owner, r.LeaseUntil = owner, now.Add(ttl)
	nrev, err := s.write(ctx, r, rev)
	if conflict(err) {
		return nil, r, fmt.Errorf("%w: taken concurrently", ErrLeased)
	}
	if err != nil {
		return nil, Record{}, fmt.Errorf("backfill lease of %s: %w", crawlID, err)
	}
	return &Lease{CrawlID: crawlID, Owner: owner, Revision: nrev}, r, nil
}

// Save implements StateStore.
func (s *KVStore) Save(ctx context.Context, l *Lease, rec Record, ttl time.Duration) error {
	rec.CrawlID, rec.Owner, rec.LeaseUntil = l.CrawlID, l.Owner, s.now().Add(ttl)
	return s.update(ctx, l, rec)
}

// Release implements StateStore.
func (s *KVStore) Release(ctx context.Context, l *Lease, rec Record) error {
	rec.CrawlID, rec.Owner, rec.LeaseUntil = l.CrawlID, "", time.Time{}
	return s.update(ctx, l, rec)
}

func (s *KVStore) update(ctx context.Context, l *Lease, rec Record) error {
	rev, err := s.write(ctx, rec, l.Revision)
	if conflict(err) {
		return fmt.Errorf("%w: %s", ErrLeaseLost, l.CrawlID)
	}
	if err != nil {
		return fmt.Errorf("backfill state of %s: %w", l.CrawlID, err)
	}
	l.Revision = rev
	return nil
}

// Touch implements StateStore.
func (s *KVStore) Touch(ctx context.Context, crawlID, kind string, due time.Time) error {
	_, err := s.write(ctx, Record{CrawlID: crawlID, Kind: kind, State: StatePending, DueAt: due.UTC()}, 0)
	if err != nil && !conflict(err) {
		return fmt.Errorf("backfill state of %s: %w", crawlID, err)
	}
	return nil
}

// List implements StateStore.
func (s *KVStore) List(ctx context.Context) ([]Record, error) {
	keys, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("backfill state keys: %w", err)
	}
	var out []Record
	for k := range keys.Keys() {
		r, rev, err := s.read(ctx, k)
		if err != nil {
			keys.Stop()
			return nil, err
		}
		if rev != 0 {
			out = append(out, r)
		}
	}
	return out, nil
}
