package receiver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/backoff"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// The quarantine keeps refused deliveries for a second look
// (`receiver redrive-rejected`, redrive.go), in two classes, each in a
// stream of its own with its own byte budget and age limit, so that no
// amount of unauthenticated traffic can evict what an authenticated sender
// sent:
//
//   - invalid: the delivery was authenticated (signature, shared token or
//     WEBHOOK_ALLOW_UNSIGNED) and failed validation (answered 400);
//   - unverified: its signature was well-formed but matched no secret
//     (answered 401: a secret half-rotated or mistyped), and its body is a
//     JSON object with a type and a job id.
//
// Keeping is best effort and never slows or changes the answer: the
// refusal path copies the body into its class's bounded queue
// (RECEIVER_QUARANTINE_QUEUE_BYTES each) or drops it with a counter; one
// goroutine publishes from the queues, the invalid class's first. The
// queues are apart for the same reason as the streams: a flood of forged
// deliveries fills the unverified queue only, and never makes an
// authenticated sender's delivery drop. Nothing in the quarantine is read by the sink: it is never
// archived, counted or used for backfill until a redrive has verified and
// validated it again. The classes and their streams are declared with the
// other JetStream streams (stream.QuarantineStreams).
const (
	ClassInvalid    = stream.QuarantineInvalid
	ClassUnverified = stream.QuarantineUnverified
)

var classes = stream.QuarantineClasses()

// How a kept delivery was authenticated when it was refused.
const (
	authSignature = "signature"
	authToken     = "token"
	authUnsigned  = "unsigned"
	authNone      = "none"
)

// Headers of a quarantined message; its data is the delivery's body as
// received. The values of the request's headers are not kept (they may
// hold a token or credentials), except the signatures: a signature is a
// MAC of the body, not a secret, and a redrive needs it to verify the body
// under a secret added since.
const (
	HeaderRejectedReason    = "Crawlhouse-Rejected-Reason"
	HeaderRejectedAt        = "Crawlhouse-Rejected-At"
	HeaderRejectedAuth      = "Crawlhouse-Rejected-Auth"
	HeaderRejectedRemote    = "Crawlhouse-Rejected-Remote"
	HeaderRejectedHeaders   = "Crawlhouse-Rejected-Header-Names"
	HeaderRejectedSignature = "Crawlhouse-Rejected-Signature"
	HeaderRejectedType      = "Crawlhouse-Rejected-Type"
	HeaderRejectedJobID     = "Crawlhouse-Rejected-Job-Id"
	HeaderRejectedWebhookID = "Crawlhouse-Rejected-Webhook-Id"
)

// QuarantineConfig is the quarantine's part of Config.
type QuarantineConfig struct {
	// Quarantine turns keeping refused deliveries on.
	Quarantine bool `envconfig:"RECEIVER_QUARANTINE" default:"true" desc:"keep refused deliveries (signed but invalid; well-formed with a signature that did not verify) in bounded streams for receiver redrive-rejected"`
	// QuarantineStreams names the streams (RECEIVER_QUARANTINE_STREAM).
	stream.QuarantineStreams
	// The byte budgets of the two classes (oldest dropped first) and the
	// age limit of both.
	QuarantineMaxBytes           int64         `envconfig:"RECEIVER_QUARANTINE_MAX_BYTES" default:"268435456" desc:"byte budget of the authenticated-but-invalid deliveries kept; the oldest go first"`
	QuarantineUnverifiedMaxBytes int64         `envconfig:"RECEIVER_QUARANTINE_UNVERIFIED_MAX_BYTES" default:"67108864" desc:"byte budget of the deliveries kept whose signature did not verify; the oldest go first"`
	QuarantineMaxAge             time.Duration `envconfig:"RECEIVER_QUARANTINE_MAX_AGE" default:"168h" desc:"how long a refused delivery is kept"`
	// QuarantineQueueBytes bounds the bodies of each class waiting to be
	// written.
	QuarantineQueueBytes int64 `envconfig:"RECEIVER_QUARANTINE_QUEUE_BYTES" default:"16777216" desc:"body bytes of each class waiting to be written to the quarantine; beyond it refused deliveries of that class are not kept (counted)"`
}

// maxQueued bounds each queue's length whatever the bodies' sizes.
const maxQueued = 1024

// Validate checks the quarantine settings.
func (c QuarantineConfig) Validate() error {
	if !c.Quarantine {
		return nil
	}
	errs := []error{c.QuarantineStreams.Validate()}
	if c.QuarantineMaxBytes <= 0 {
		errs = append(errs, errors.New("RECEIVER_QUARANTINE_MAX_BYTES: must be positive"))
	}
	if c.QuarantineUnverifiedMaxBytes <= 0 {
		errs = append(errs, errors.New("RECEIVER_QUARANTINE_UNVERIFIED_MAX_BYTES: must be positive"))
	}
	if c.QuarantineMaxAge <= 0 {
		errs = append(errs, errors.New("RECEIVER_QUARANTINE_MAX_AGE: must be positive"))
	}
	if c.QuarantineQueueBytes <= 0 {
		errs = append(errs, errors.New("RECEIVER_QUARANTINE_QUEUE_BYTES: must be positive"))
	}
	return errors.Join(errs...)
}

// quarantineStream is the stream of one class.
func (c QuarantineConfig) quarantineStream(class string, replicas int) jetstream.StreamConfig {
	budget := c.QuarantineMaxBytes
	if class == ClassUnverified {
		budget = c.QuarantineUnverifiedMaxBytes
	}
	return c.StreamOf(class, budget, c.QuarantineMaxAge, replicas)
}

// rejected is one refused delivery waiting in the queue.
type rejected struct {
	class, reason, auth, remote string
	at                          time.Time
	names, sigs                 []string
	body                        []byte
}

// quarantine keeps refused deliveries (see the package comment above).
// A nil *quarantine keeps nothing.
type quarantine struct {
	cfg      QuarantineConfig
	replicas int
	log      zerolog.Logger
	now      func() time.Time
	// invalid and unverified are the classes' queues.
	invalid, unverified *rejectedQueue
	kept                map[string]prometheus.Counter
	dropped             *prometheus.CounterVec
}

// rejectedQueue is one class's queue of refused deliveries.
type rejectedQueue struct {
	ch     chan *rejected
	queued atomic.Int64 // body bytes in ch
}

func newRejectedQueue() *rejectedQueue { return &rejectedQueue{ch: make(chan *rejected, maxQueued)} }

// of is class's queue.
func (q *quarantine) of(class string) *rejectedQueue {
	if class == ClassInvalid {
		return q.invalid
	}
	return q.unverified
}

// Reasons a refused delivery was not kept (the reason label of
// crawlhouse_webhook_quarantine_dropped_total).
const (
	dropQueueFull     = "queue_full"
	dropTooLarge      = "too_large"
	dropNotWellFormed = "not_well_formed"
	dropPublish       = "publish_failed"
)

func newQuarantine(cfg QuarantineConfig, replicas int, log zerolog.Logger, reg prometheus.Registerer) *quarantine {
	q := &quarantine{cfg: cfg, replicas: replicas, log: log, now: time.Now,
		invalid: newRejectedQueue(), unverified: newRejectedQueue(), kept: map[string]prometheus.Counter{}}
	kept := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "crawlhouse_webhook_quarantined_total",
		Help: "Refused deliveries kept in the quarantine, by class (invalid: authenticated, failed validation; unverified: signature did not verify).",
	}, []string{"class"})
	q.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "crawlhouse_webhook_quarantine_dropped_total",
		Help: "Refused deliveries not kept in the quarantine, by class and reason (queue_full, too_large, not_well_formed, publish_failed).",
	}, []string{"class", "reason"})
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "crawlhouse_webhook_quarantine_queue_bytes",
		Help: "Body bytes of refused deliveries waiting to be written to the quarantine, both classes (each bounded by RECEIVER_QUARANTINE_QUEUE_BYTES).",
	}, func() float64 { return float64(q.invalid.queued.Load() + q.unverified.queued.Load()) })
	for _, c := range classes {
		q.kept[c] = kept.WithLabelValues(c)
		for _, r := range []string{dropQueueFull, dropTooLarge, dropNotWellFormed, dropPublish} {
			q.dropped.WithLabelValues(c, r)
		}
	}
	reg.MustRegister(kept, q.dropped, queued)
	return q
}

// keep queues a refused delivery, or counts it dropped; it never blocks.
// sigHeaders are the headers whose values are kept (the signatures); of
// the others only the names are.
func (q *quarantine) keep(class string, h http.Header, sigHeaders []string, body []byte, remote, auth string, reason error) {
	if q == nil {
		return
	}
	n, cq := int64(len(body)), q.of(class)
	if cq.queued.Add(n) > q.cfg.QuarantineQueueBytes {
		cq.queued.Add(-n)
		q.dropped.WithLabelValues(class, dropQueueFull).Inc()
		return
	}
	r := &rejected{class: class, reason: reason.Error(), auth: auth, remote: remote, at: q.now(),
		body: append([]byte(nil), body...)}
	for name := range h {
		if len(r.names) == 64 {
			break
		}
		r.names = append(r.names, name)
	}
	sort.Strings(r.names)
	for _, name := range sigHeaders {
		if v := h.Get(name); v != "" {
			r.sigs = append(r.sigs, v)
		}
	}
	select {
	case cq.ch <- r:
	default:
		cq.queued.Add(-n)
		q.dropped.WithLabelValues(class, dropQueueFull).Inc()
	}
}

// run creates the streams, then writes what is queued until ctx is done;
// what is still queued then is dropped.
func (q *quarantine) run(ctx context.Context, js jetstream.JetStream) {
	schedule := backoff.Exponential{First: 250 * time.Millisecond, Max: 5 * time.Second}
	err := backoff.Retry(ctx, schedule, func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return stream.EnsureQuarantine(cctx, js, func(c string) jetstream.StreamConfig { return q.cfg.quarantineStream(c, q.replicas) })
	}, func(_ int, err error, wait time.Duration) bool {
		q.log.Warn().Err(err).Dur("retry_in", wait).Msg("quarantine streams not created yet")
		return true
	})
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		r := q.next()
		if r == nil {
			select {
			case <-ctx.Done():
				return
			case r = <-q.invalid.ch:
			case r = <-q.unverified.ch:
			}
		}
		q.store(ctx, js, r)
		q.of(r.class).queued.Add(-int64(len(r.body)))
	}
}

// next takes a queued delivery without waiting, the invalid class's
// first; nil when both queues are empty.
func (q *quarantine) next() *rejected {
	for _, cq := range []*rejectedQueue{q.invalid, q.unverified} {
		select {
		case r := <-cq.ch:
			return r
		default:
		}
	}
	return nil
}

// store writes one refused delivery.
func (q *quarantine) store(ctx context.Context, js jetstream.JetStream, r *rejected) {
	m, ok := q.message(r)
	if !ok {
		q.dropped.WithLabelValues(r.class, dropNotWellFormed).Inc()
		return
	}
	if size := len(m.Data) + headerSize(m.Header); int64(size) > js.Conn().MaxPayload() {
		q.dropped.WithLabelValues(r.class, dropTooLarge).Inc()
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(pctx, m); err != nil {
		q.dropped.WithLabelValues(r.class, dropPublish).Inc()
		q.log.Debug().Err(err).Str("class", r.class).Msg("quarantine: refused delivery not kept")
		return
	}
	q.kept[r.class].Inc()
}

// message is r as a quarantine message. ok is false for an unverified
// delivery whose body is not a JSON object with a type and a job id: a
// stranger's bytes are not kept.
func (q *quarantine) message(r *rejected) (*nats.Msg, bool) {
	h := headOf(r.body)
	if r.class == ClassUnverified && (h.Type == "" || h.job() == "") {
		return nil, false
	}
	m := nats.NewMsg(q.cfg.SubjectOf(r.class))
	m.Header.Set(HeaderRejectedReason, r.reason)
	m.Header.Set(HeaderRejectedAt, r.at.UTC().Format(time.RFC3339Nano))
	m.Header.Set(HeaderRejectedAuth, r.auth)
	m.Header.Set(HeaderRejectedRemote, r.remote)
	m.Header.Set(HeaderRejectedHeaders, strings.Join(r.names, ","))
	for _, s := range r.sigs {
		m.Header.Add(HeaderRejectedSignature, s)
	}
	for k, v := range map[string]string{HeaderRejectedType: h.Type, HeaderRejectedJobID: h.job(), HeaderRejectedWebhookID: h.WebhookID} {
		if v != "" {
			m.Header.Set(k, v)
		}
	}
	if r.class == ClassInvalid {
		sum := sha256.Sum256(r.body)
		m.Header.Set(nats.MsgIdHdr, r.class+"."+hex.EncodeToString(sum[:16]))
	}
	m.Data = r.body
	return m, true
}

// looseHead is what the quarantine reads of a refused body: strings only,
// each at most maxHeadField bytes (longer ones are dropped).
type looseHead struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	JobID     string `json:"jobId"`
	WebhookID string `json:"webhookId"`
}

const maxHeadField = 128

func (h looseHead) job() string {
	if h.ID != "" {
		return h.ID
	}
	return h.JobID
}

// headOf reads body's type and ids, "" where absent or unusable.
func headOf(body []byte) looseHead {
	var raw map[string]json.RawMessage
	var h looseHead
	if json.Unmarshal(body, &raw) != nil {
		return h
	}
	for k, dst := range map[string]*string{"type": &h.Type, "id": &h.ID, "jobId": &h.JobID, "webhookId": &h.WebhookID} {
		var s string
		if v, ok := raw[k]; ok && json.Unmarshal(v, &s) == nil && len(s) <= maxHeadField && printable(s) {
			*dst = s
		}
	}
	return h
}

// printable: the value may go into a NATS header.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// headerSize is about the bytes h takes on the wire.
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
