// Package wal is the receiver's write-ahead log: each delivery is written to
// a pebble database with a synced commit before the sender is answered, so
// that the events stream itself may sync lazily. Concurrent deliveries share
// one fsync: pebble's commit pipeline syncs its log once for every batch
// waiting at that moment (group commit), which is what makes durability
// cheap under concurrency.
//
// What the log holds is replayed into JetStream when the receiver starts
// (the stream drops what it already holds by Nats-Msg-Id), and an entry is
// trimmed only once its delivery was answered (PubAck in) at least the
// retention ago, which the configuration keeps above the server's sync
// interval: by then the stream holds it on stable storage.
//
// A log of plain segment files (pebble's record package) was tried in its
// place and measured no faster: creating and syncing a new file per segment
// cost what the memtable saved (docs/benchmarks.md, the durable fast layout).
package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Errors of Append. Both mean the delivery is not on stable storage and
// must not be acknowledged to its sender.
var (
	// ErrFull: the log holds MaxBytes or more (JetStream unreachable for
	// longer than the retention would drain, or a burst larger than the
	// bound).
	ErrFull = errors.New("write-ahead log full")
	// ErrClosed: the log was closed (the receiver is shutting down).
	ErrClosed = errors.New("write-ahead log closed")
)

// Options configure a WAL.
type Options struct {
	// Dir is the log's directory, created if missing.
	Dir string
	// Retention is how long an entry is kept after its delivery was
	// answered (Pending.Done). It must cover the stream's sync interval: an
	// entry trimmed earlier may be lost with the server's page cache.
	Retention time.Duration
	// MaxBytes bounds the log's size on disk (approximately: it is measured
	// once per trim and counted up between). Beyond it Append fails with
	// ErrFull.
	MaxBytes int64
	// Registerer, when set, receives the log's metrics
	// (crawlhouse_receiver_wal_…).
	Registerer prometheus.Registerer
	// Logger takes pebble's own messages, at warn level and above.
	Logger zerolog.Logger
	// Now is the clock (time.Now by default); tests inject one.
	Now func() time.Time
	// CommitDelay and CommitSiblings: when at least CommitSiblings
	// deliveries are in flight (handed to the log and not yet answered),
	// the committer waits CommitDelay before each synced write, so that
	// more of them join its group and share its fsync. Below that it
	// syncs at once: waiting only pays when others are about to arrive.
	// Zero CommitDelay never waits.
	CommitDelay    time.Duration
	CommitSiblings int

	// wait is the committer's wait before a sync: sleep for d or until
	// stop is closed (sleep, unless a test replaces it).
	wait func(d time.Duration, stop <-chan struct{})
}

// WAL is an open write-ahead log. It is safe for concurrent use.
type WAL struct {
	db   *pebble.DB
	opts Options
	now  func() time.Time

	// mu guards closing: pebble panics on a write to a closed database, so
	// every use holds the read lock and Close the write lock.
	mu     sync.RWMutex
	closed bool

	// gmu guards next, the group being filled; the committer goroutine
	// is woken through wake, stopped through stop, and closes committed
	// when it is done.
	gmu       sync.Mutex
	next      *group
	wake      chan struct{}
	stop      chan struct{}
	committed chan struct{}

	// flight holds the entries whose delivery is still being handled
	// (Begin without Done), by sequence, with their key's time; guarded by
	// gmu.
	flight map[uint64]int64
	// marks are what Trim saw, oldest first: at each tick, the time below
	// which no entry was in flight any more; cutoff is the newest mark that
	// is Retention old. Both are Trim's alone.
	marks  []mark
	cutoff int64

	// seq makes keys written in the same nanosecond distinct.
	seq atomic.Uint64
	// openedAt: every entry older than this was written by an earlier
	// process and is replayed (see Replay).
	openedAt time.Time
	// holdUntil is when trimming may start, as unix nanoseconds: never
	// (math.MaxInt64) until Replay has published everything an earlier
	// process left, then Retention after that, since the stream's copies of
	// the replayed entries are durable only once the server has synced.
	holdUntil atomic.Int64
	// measured is the size on disk at the last trim; added counts the bytes
	// appended since.
	measured, added atomic.Int64

	m walMetrics
}

type walMetrics struct {
	bytes    prometheus.Gauge
	sync     prometheus.Histogram
	replayed prometheus.Counter
	failures *prometheus.CounterVec
}

// Open opens (or creates) the log in opts.Dir.
func Open(opts Options) (*WAL, error) {
	if opts.Dir == "" {
		return nil, errors.New("wal: no directory")
	}
	if opts.Retention <= 0 {
		return nil, errors.New("wal: retention must be positive")
	}
	if opts.MaxBytes <= 0 {
		return nil, errors.New("wal: MaxBytes must be positive")
	}
	if opts.CommitDelay < 0 {
		return nil, errors.New("wal: CommitDelay must not be negative")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.wait == nil {
		opts.wait = sleep
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	po := &pebble.Options{
		// Entries live for seconds: a memtable that outlives them means
		// most are trimmed (by a range deletion in the same memtable) before
		// they would be flushed to a table, and written only once, to the
		// log.
		MemTableSize: 64 << 20,
		Logger:       pebbleLogger{opts.Logger},
	}
	db, err := pebble.Open(opts.Dir, po)
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", opts.Dir, err)
	}
	w := &WAL{db: db, opts: opts, now: opts.Now, openedAt: opts.Now(),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), committed: make(chan struct{})}
	w.next = w.newGroup()
	w.flight = map[uint64]int64{}
	w.holdUntil.Store(math.MaxInt64)
	w.m = newMetrics()
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{w.m.bytes, w.m.sync, w.m.replayed, w.m.failures} {
			if err := opts.Registerer.Register(c); err != nil {
				_ = db.Close()
				return nil, fmt.Errorf("wal: metrics: %w", err)
			}
		}
	}
	w.measure()
	go w.commit()
	return w, nil
}

func newMetrics() walMetrics {
	return walMetrics{
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "crawlhouse_receiver_wal_bytes",
			Help: "Size of the receiver's write-ahead log on disk (bounded by RECEIVER_WAL_MAX_BYTES).",
		}),
		sync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "crawlhouse_receiver_wal_sync_seconds",
			Help:    "Time of one synced commit of the write-ahead log (one per group of deliveries).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawlhouse_receiver_wal_replayed_total",
			Help: "Deliveries an earlier process left in the write-ahead log, published again at start.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawlhouse_receiver_wal_failures_total",
			Help: "Deliveries the write-ahead log could not take (answered 503), by reason: full, closed, error.",
		}, []string{"reason"}),
	}
}

// Append writes env (as received: call it before the publisher replaces
// the body) and returns once it is on stable storage; the entry counts as
// answered (see Pending.Done).
func (w *WAL) Append(env *delivery.Envelope) error {
	p, err := w.Begin(env)
	if err != nil {
		return err
	}
	defer p.Done()
	return p.Wait()
}

// Pending is an entry handed to the log whose sync may still be under
// way: Wait tells when it is on stable storage.
type Pending struct {
	w   *WAL
	g   *group
	seq uint64
}

// mark is one of Trim's observations: at time at, every entry with a key
// time below settled had been answered.
type mark struct{ at, settled int64 }

// group is the entries of one commit: one pebble batch, applied with one
// synced write by the committer goroutine.
type group struct {
	b    *pebble.Batch
	size int64
	done chan struct{}
	err  error
}

// Begin hands env to the log without waiting for the sync, so that the
// caller can publish the delivery meanwhile; Wait must follow. It copies
// what it needs from env: env may change once Begin has returned.
//
// Entries are committed in groups by one goroutine: all those that arrive
// while a group's fsync is under way form the next group, one pebble batch
// applied with one synced write. pebble's commit pipeline also shares a
// sync among concurrent committers, but it makes batches visible in order,
// so each committer waits for every earlier one to be applied, and on a
// busy machine each of those steps waits its turn for a CPU; with one
// committer of groups, the receiver carried 9.1-9.6k deliveries/s at 128
// connections where pebble's pipeline carried 6.1-8.7k (docs/benchmarks.md).
func (w *WAL) Begin(env *delivery.Envelope) (*Pending, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.m.failures.WithLabelValues("closed").Inc()
		return nil, ErrClosed
	}
	if used := w.measured.Load() + w.added.Load(); used >= w.opts.MaxBytes {
		w.m.failures.WithLabelValues("full").Inc()
		return nil, fmt.Errorf("%w: %d bytes or more, RECEIVER_WAL_MAX_BYTES is %d", ErrFull, used, w.opts.MaxBytes)
	}
	n := recordLen(env)
	w.gmu.Lock()
	// The key's time is taken under the lock that Trim reads the entries in
	// flight under: Trim can then never see a moment after this entry's
	// time without seeing the entry in flight.
	at := w.now()
	seq := w.seq.Add(1)
	key := entryKey(at, seq)
	w.flight[seq] = at.UnixNano()
	g := w.next
	op := g.b.SetDeferred(len(key), n)
	copy(op.Key, key[:])
	putRecord(op.Value, env)
	err := op.Finish()
	g.size += int64(len(key) + n)
	w.gmu.Unlock()
	p := &Pending{w: w, g: g, seq: seq}
	if err != nil {
		// The batch holds the entry regardless; it will be written, and
		// replayed, like any other.
		p.Done()
		w.m.failures.WithLabelValues("error").Inc()
		return nil, fmt.Errorf("wal: %w", err)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return p, nil
}

// Done tells the log that the delivery has been answered (whatever the
// answer): its entry may be trimmed from Retention after now. Until Done,
// it is kept however old it is.
func (p *Pending) Done() {
	p.w.gmu.Lock()
	delete(p.w.flight, p.seq)
	p.w.gmu.Unlock()
}

// Wait returns once the entry is on stable storage, or the error that
// kept it from getting there.
func (p *Pending) Wait() error {
	<-p.g.done
	if p.g.err != nil {
		return p.g.err
	}
	return nil
}

// commit is the committer goroutine: it applies each group with a synced
// write, until Close.
//
// Under load it first waits Options.CommitDelay (when at least
// CommitSiblings deliveries are in flight): each fsync of this machine's
// disk costs about 100 µs of CPU and 250 µs or more of waiting, whatever
// it carries, and at 128 connections the deliveries arriving during one
// sync were only about 7. Waiting 500 µs once 64 are in flight made the
// groups larger and the receiver 6-12% faster there, and left lower
// concurrency as it was (docs/benchmarks.md, the durable fast layout).
func (w *WAL) commit() {
	defer close(w.committed)
	for {
		select {
		case <-w.wake:
		case <-w.stop:
			w.flushGroup() // entries handed over before Close
			return
		}
		if w.opts.CommitDelay > 0 && w.inFlight() >= w.opts.CommitSiblings {
			w.opts.wait(w.opts.CommitDelay, w.stop)
		}
		w.flushGroup()
	}
}

// inFlight is the number of entries handed to the log whose delivery is
// not answered yet.
func (w *WAL) inFlight() int {
	w.gmu.Lock()
	defer w.gmu.Unlock()
	return len(w.flight)
}

// sleep waits d, or less if stop is closed.
func sleep(d time.Duration, stop <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
}

// flushGroup swaps the group being filled for a fresh one and commits it.
func (w *WAL) flushGroup() {
	w.gmu.Lock()
	g := w.next
	if g.b.Empty() {
		w.gmu.Unlock()
		return
	}
	w.next = w.newGroup()
	w.gmu.Unlock()
	start := time.Now()
	if err := w.db.Apply(g.b, pebble.Sync); err != nil {
		g.err = fmt.Errorf("wal: commit: %w", err)
		w.m.failures.WithLabelValues("error").Add(float64(g.b.Count()))
	} else {
		w.m.sync.Observe(time.Since(start).Seconds())
		w.added.Add(g.size)
	}
	close(g.done)
	_ = g.b.Close()
}

func (w *WAL) newGroup() *group {
	return &group{b: w.db.NewBatch(), done: make(chan struct{})}
}

// entryKey is a time-ordered key: the write time in unix nanoseconds, then
// a counter, both big-endian, so that the entries older than a moment are
// one key range.
func entryKey(at time.Time, seq uint64) [16]byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], uint64(max(at.UnixNano(), 0)))
	binary.BigEndian.PutUint64(k[8:], seq)
	return k
}

func boundary(at time.Time) []byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], uint64(max(at.UnixNano(), 0)))
	return k[:]
}

// Replay calls publish, in the order they were written, for every entry
// that an earlier process left in the log, and returns how many there were.
// It stops at publish's first error; the caller tries again (publishing is
// idempotent by webhookId inside the stream's duplicate window). Once it has
// returned nil, trimming may start Retention later. Entries that cannot be
// decoded are logged by the caller through onBad and skipped: nothing could
// ever publish them.
func (w *WAL) Replay(ctx context.Context, publish func(context.Context, *delivery.Envelope) error, onBad func(error)) (int, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return 0, ErrClosed
	}
	it, err := w.db.NewIter(&pebble.IterOptions{UpperBound: boundary(w.openedAt)})
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return n, fmt.Errorf("wal: read: %w", err)
		}
		env, err := decodeRecord(v)
		if err != nil {
			if onBad != nil {
				onBad(fmt.Errorf("wal: entry %x: %w", it.Key(), err))
			}
			continue
		}
		if err := publish(ctx, env); err != nil {
			return n, err
		}
		n++
		w.m.replayed.Inc()
	}
	if err := it.Error(); err != nil {
		return n, fmt.Errorf("wal: read: %w", err)
	}
	w.holdUntil.Store(w.now().Add(w.opts.Retention).UnixNano())
	return n, nil
}

// Trim deletes the entries that are known durable in the stream: those
// whose delivery had been answered (published, PubAck in) Retention ago or
// earlier. None before Replay has succeeded, nor until Retention after it.
// The deletion is not synced: should it be lost, the entries are replayed
// once more, which the stream's deduplication absorbs. Call it from one
// goroutine (Run does).
func (w *WAL) Trim() error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	now := w.now().UnixNano()
	settled := now
	w.gmu.Lock()
	for _, at := range w.flight {
		settled = min(settled, at)
	}
	w.gmu.Unlock()
	w.marks = append(w.marks, mark{at: now, settled: settled})
	i := 0
	for ; i < len(w.marks) && w.marks[i].at <= now-int64(w.opts.Retention); i++ {
		w.cutoff = max(w.cutoff, w.marks[i].settled)
	}
	w.marks = w.marks[i:]
	if now >= w.holdUntil.Load() && w.cutoff > 0 {
		if err := w.db.DeleteRange(boundary(time.Unix(0, 0)), boundary(time.Unix(0, w.cutoff)), pebble.NoSync); err != nil {
			return fmt.Errorf("wal: trim: %w", err)
		}
	}
	w.measure()
	return nil
}

// measure refreshes the size on disk. (No entry count: counting means a
// scan over the tables, which cost a tenth of the receiver's CPU at peak.)
func (w *WAL) measure() {
	size := int64(w.db.Metrics().DiskSpaceUsage())
	w.measured.Store(size)
	w.added.Store(0)
	w.m.bytes.Set(float64(size))
}

// Run trims every interval until ctx is done, logging failures.
func (w *WAL) Run(ctx context.Context, interval time.Duration, log zerolog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := w.Trim(); err != nil && !errors.Is(err, ErrClosed) {
				log.Warn().Err(err).Msg("write-ahead log: trim")
			}
		}
	}
}

// Close closes the log; later Appends fail with ErrClosed. What it holds
// stays for the next start to replay.
func (w *WAL) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	close(w.stop)
	<-w.committed
	return w.db.Close()
}

// pebbleLogger passes pebble's messages to zerolog: Infof at debug level
// (pebble reports every flush and compaction), errors as errors.
type pebbleLogger struct{ log zerolog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug().Str("source", "pebble").Msgf(format, args...)
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error().Str("source", "pebble").Msgf(format, args...)
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error().Str("source", "pebble").Msgf(format, args...)
	panic(fmt.Sprintf(format, args...))
}
