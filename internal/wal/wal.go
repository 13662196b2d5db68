// Package wal is the receiver's write-ahead log: each delivery is written to
// a pebble database with a synced commit before the sender is answered, so
// that the events stream itself may sync lazily. Concurrent deliveries share
// one fsync: one committer goroutine applies every entry waiting at that
// moment as one pebble batch with one synced write (group commit, waiting
// Options.CommitDelay first under load), which is what makes durability
// cheap under concurrency.
//
// What the log holds is replayed into JetStream when the receiver starts
// (the stream drops what it already holds by Nats-Msg-Id), and an entry is
// trimmed only once it is known durable in the stream: its delivery was
// answered (PubAck in), and after that the stream's store was synced
// (Options.StreamSync). No clock is read: entries are keyed by their
// position in the log, so a clock stepped either way, while running or
// between two processes, changes neither what is replayed nor what is
// trimmed.
//
// A log damaged on disk (a record that fails its checksum while later
// ones are intact) is told apart from a torn tail by pebble's own WAL
// format (FormatWALSyncChunks: each record says how far the log was synced
// when it was written); Open then keeps every intact entry and reports the
// damage (salvage.go).
//
// A log of plain segment files (pebble's record package) was tried in its
// place and measured no faster: creating and syncing a new file per segment
// cost what the memtable saved (docs/benchmarks.md, "The write-ahead log").
package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
	// ErrFull: the log holds MaxBytes or more (JetStream unreachable, or
	// its store not syncing, for longer than the bound lasts).
	ErrFull = errors.New("write-ahead log full")
	// ErrClosed: the log was closed (the receiver is shutting down).
	ErrClosed = errors.New("write-ahead log closed")
)

// Options configure a WAL.
type Options struct {
	// Dir is the log's directory, created if missing.
	Dir string
	// StreamSync makes durable everything the stream acknowledged before
	// it was called, or returns an error (the embedded server's store:
	// stream.StoreSyncer). Trim deletes only entries answered before a
	// StreamSync that succeeded. Nil: a PubAck already means durable (a
	// server that syncs before each PubAck).
	StreamSync func() error
	// MaxBytes bounds the log's size on disk (approximately: it is measured
	// once per trim and counted up between). Beyond it Append fails with
	// ErrFull. At least MinMaxBytes: the memtable is sized from it.
	MaxBytes int64
	// Registerer, when set, receives the log's metrics
	// (crawlhouse_receiver_wal_…).
	Registerer prometheus.Registerer
	// Logger takes pebble's own messages, at warn level and above, and the
	// report of a damaged log.
	Logger zerolog.Logger
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

// MinMaxBytes is the least Options.MaxBytes: below it the memtable, a
// quarter of the bound, would be too small to hold a delivery or two.
const MinMaxBytes = 4 << 20

// maxMemTable is the memtable's size when MaxBytes allows it.
const maxMemTable = 64 << 20

// WAL is an open write-ahead log. It is safe for concurrent use.
type WAL struct {
	db   *pebble.DB
	opts Options

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

	// pos is the position of the last entry handed to the log: keys are
	// positions, so that the entries below one are one key range. It
	// starts after the last entry an earlier process left. flight holds
	// the positions of the entries whose delivery is still being handled
	// (Begin without Done). Both are guarded by gmu.
	pos    uint64
	flight map[uint64]struct{}
	// firstPos is this process's first position: the entries below it
	// were written by an earlier process and are replayed (see Replay).
	firstPos uint64
	// replayed is set once Replay has published everything an earlier
	// process left: trimming starts only then.
	replayed atomic.Bool
	// trimmed is the position below which the log was trimmed (written
	// by Trim alone, under gmu).
	trimmed uint64
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
	damaged  prometheus.Counter
	pending  prometheus.Gauge
}

// Open opens (or creates) the log in opts.Dir. A log whose pebble WAL is
// damaged in its middle is salvaged (see salvage): every intact entry is
// kept, the damaged file is moved aside, and the damage is logged at error
// level and counted in crawlhouse_receiver_wal_damaged_total.
func Open(opts Options) (*WAL, error) {
	if opts.Dir == "" {
		return nil, errors.New("wal: no directory")
	}
	if opts.MaxBytes < MinMaxBytes {
		return nil, fmt.Errorf("wal: MaxBytes %d is below the least workable bound, %d", opts.MaxBytes, MinMaxBytes)
	}
	if opts.CommitDelay < 0 {
		return nil, errors.New("wal: CommitDelay must not be negative")
	}
	if opts.wait == nil {
		opts.wait = sleep
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	m := newMetrics()
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{m.bytes, m.sync, m.replayed, m.failures, m.damaged, m.pending} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("wal: metrics: %w", err)
			}
		}
	}
	db, err := openDB(opts, m)
	if err != nil {
		return nil, err
	}
	w := &WAL{db: db, opts: opts, m: m, flight: map[uint64]struct{}{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), committed: make(chan struct{})}
	if w.pos, err = lastPos(db); err != nil {
		_ = db.Close()
		return nil, err
	}
	w.firstPos = w.pos + 1
	w.next = w.newGroup()
	w.measure()
	go w.commit()
	return w, nil
}

// pebbleOptions are the database's options for a log bounded by maxBytes.
func pebbleOptions(maxBytes int64, log zerolog.Logger) *pebble.Options {
	return &pebble.Options{
		// Entries live for a fraction of a second: a memtable that
		// outlives them means most are trimmed (by a range deletion in the
		// same memtable) before they would be flushed to a table, and
		// written only once, to the log. It is at most a quarter of the
		// bound: the log on disk is about the memtables not yet flushed
		// (two at most before pebble stalls writes), so a bound below them
		// would fill up with entries long trimmed and never drain.
		MemTableSize: uint64(min(maxMemTable, maxBytes/4)),
		// The format whose log records say how far the log was synced when
		// each was written: a damaged record followed by intact ones is
		// then told apart from a torn tail (pebble.ErrCorruption at Open).
		FormatMajorVersion: pebble.FormatWALSyncChunks,
		Logger:             pebbleLogger{log},
	}
}

// lastPos is the position of the last entry in db, 0 if none. Keys written
// before positions replaced times (16 bytes: a time, a counter) sort below
// every position this gives, so they stay older entries.
func lastPos(db *pebble.DB) (uint64, error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	defer it.Close()
	if !it.Last() {
		return 0, it.Error()
	}
	if len(it.Key()) < 8 {
		return 0, fmt.Errorf("wal: unknown key %x", it.Key())
	}
	return binary.BigEndian.Uint64(it.Key()[:8]), nil
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
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "crawlhouse_receiver_wal_pending_entries",
			Help: "Entries of this process in the write-ahead log not yet known durable in the stream: answered or not, written and not yet trimmed after a sync of the stream.",
		}),
		damaged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawlhouse_receiver_wal_damaged_total",
			Help: "Damaged places found in the write-ahead log at start, each followed by intact entries: the entries in them are lost (the log says which file and offset).",
		}),
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
	pos uint64
}

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
// busy machine each of those steps waits its turn for a CPU. With one
// committer of groups the receiver carries more deliveries at high
// concurrency than with pebble's pipeline (docs/benchmarks.md, the durable
// fast layout, has the figures).
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
	// The position is taken under the lock that Trim reads the entries in
	// flight under: Trim can then never see a position after this one
	// without seeing this entry in flight.
	w.pos++
	pos := w.pos
	key := entryKey(pos)
	w.flight[pos] = struct{}{}
	w.setPendingLocked()
	g := w.next
	op := g.b.SetDeferred(len(key), n)
	copy(op.Key, key[:])
	putRecord(op.Value, env)
	err := op.Finish()
	g.size += int64(len(key) + n)
	w.gmu.Unlock()
	p := &Pending{w: w, g: g, pos: pos}
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
// answer): its entry may be trimmed once the stream's store has been
// synced after now. Until Done, it is kept however old it is.
func (p *Pending) Done() {
	p.w.gmu.Lock()
	delete(p.w.flight, p.pos)
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
// CommitSiblings deliveries are in flight): an fsync costs CPU and waiting
// whatever it carries, and even at high concurrency few deliveries arrive
// during one sync. The short wait makes the groups larger and the receiver
// faster there, and leaves lower concurrency as it was (docs/benchmarks.md,
// the durable fast layout, has the figures).
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

// entryKey is an entry's key: its position, big-endian, so that the
// entries below a position are one key range.
func entryKey(pos uint64) [8]byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], pos)
	return k
}

// Replay calls publish, in the order they were written, for every entry
// that an earlier process left in the log, and returns how many there were.
// It stops at publish's first error; the caller tries again (publishing is
// idempotent by webhookId inside the stream's duplicate window). Once it has
// returned nil, trimming may start. Entries that cannot be decoded are
// logged by the caller through onBad and skipped: nothing could ever
// publish them.
func (w *WAL) Replay(ctx context.Context, publish func(context.Context, *delivery.Envelope) error, onBad func(error)) (int, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return 0, ErrClosed
	}
	upper := entryKey(w.firstPos)
	it, err := w.db.NewIter(&pebble.IterOptions{UpperBound: upper[:]})
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
	w.replayed.Store(true)
	return n, nil
}

// Trim deletes the entries that are known durable in the stream: those
// whose delivery had been answered (published, PubAck in) before a
// StreamSync that succeeded. None before Replay has succeeded. It reads no
// clock. The deletion is not synced: should it be lost, the entries are
// replayed once more, which the stream's deduplication absorbs. Call it
// from one goroutine (Run does).
//
// Once the log is past three quarters of MaxBytes with everything trimmed
// up to the entries in flight, the memtable is flushed: the log's files
// hold what the memtable does, trimmed or not, and are released only when
// it is flushed, which its size alone would not bring about in time.
func (w *WAL) Trim() error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	if !w.replayed.Load() {
		w.measure()
		return nil
	}
	w.gmu.Lock()
	last := w.pos
	settled := last + 1
	for pos := range w.flight {
		settled = min(settled, pos)
	}
	w.gmu.Unlock()
	if settled > w.trimmed {
		// Every entry below settled was answered before this sync started:
		// its PubAck came in, so the server had written it, and the sync
		// makes that write durable.
		if w.opts.StreamSync != nil {
			if err := w.opts.StreamSync(); err != nil {
				w.measure()
				return fmt.Errorf("wal: the stream's sync (nothing trimmed): %w", err)
			}
		}
		upper := entryKey(settled)
		if err := w.db.DeleteRange([]byte{}, upper[:], pebble.NoSync); err != nil {
			return fmt.Errorf("wal: trim: %w", err)
		}
		w.gmu.Lock()
		w.trimmed = settled
		w.setPendingLocked()
		w.gmu.Unlock()
		if w.measured.Load()+w.added.Load() >= w.opts.MaxBytes/4*3 {
			if err := w.db.Flush(); err != nil {
				return fmt.Errorf("wal: flush: %w", err)
			}
		}
	}
	w.measure()
	return nil
}

// setPendingLocked sets crawlhouse_receiver_wal_pending_entries from the
// entries written and the entries trimmed, both as they are now: the gauge
// counts an entry from the moment it is written, not from the next trim
// (a reader waiting for 0 after its deliveries were answered must not see
// a 0 left by a trim that ran before they were written). gmu must be held.
func (w *WAL) setPendingLocked() {
	w.m.pending.Set(float64(w.pos + 1 - max(w.trimmed, w.firstPos)))
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
