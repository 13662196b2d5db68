package receiver

import (
	"io"
	"net/http"
	"time"
)

// pacedBody is a request body that must keep a minimum transfer rate, as
// Apache's mod_reqtimeout does (RequestReadTimeout body=20,MinRate=500):
// the body may take RECEIVER_BODY_TIMEOUT, plus one second for every
// RECEIVER_BODY_MIN_RATE bytes that have arrived, and never more than
// RECEIVER_READ_TIMEOUT in all. The connection's read deadline follows
// that point as bytes arrive, at most one second's worth ahead (see
// granted), so a sender trickling a byte every few seconds is answered 408
// once its grace (and that second) is spent, however long the body it
// announced, while a body arriving at the rate gets time in proportion to
// its length (so, at most, to its announced length). nginx's
// client_body_timeout (a bound between two reads) alone would let one byte
// every few seconds hold a body for ever.
type pacedBody struct {
	r     io.Reader
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64 // bytes per second
	limit time.Time
	got   int64
	// length is the announced Content-Length (-1: none). Once it has
	// arrived, the reads left end at EOF without touching the connection
	// (net/http's body stops at the announced length), so no deadline is
	// set for them.
	length int64
	// granted is how many bytes the connection's read deadline, as last
	// set, already counts as arrived: the deadline is set for the bytes
	// up to one second's worth (RECEIVER_BODY_MIN_RATE) past those that
	// have arrived, or to the announced length if that comes first, and
	// set again only once they have arrived. A body therefore gets at most
	// one second more than its rate earns (never less), and one of a few
	// kB, the usual delivery, moves the deadline once instead of at every
	// read: each move is a timer update in the runtime, paid per delivery.
	granted int64
	// claim is the body's place in the untrusted pool (admission.go),
	// nil for a trusted sender: it is told the bytes that arrived, and
	// may be evicted.
	claim *claim
}

func newPacedBody(r io.Reader, length int64, w http.ResponseWriter, cfg Config, now time.Time, cl *claim) *pacedBody {
	p := &pacedBody{
		r: r, rc: http.NewResponseController(w), start: now,
		grace: min(cfg.BodyTimeout, cfg.ReadTimeout), rate: cfg.BodyMinRate,
		limit: now.Add(cfg.ReadTimeout), length: length,
	}
	if cl.pooled {
		p.claim = cl
	}
	return p
}

// deadline is when a body of which got bytes have arrived must have
// progressed past them.
func (p *pacedBody) deadline(got int64) time.Time {
	// got/rate seconds, in nanoseconds without overflow: got is at most
	// WEBHOOK_MAX_BODY_BYTES+1 plus one second's worth (both bounded at
	// configuration), and the sum is capped by limit.
	earned := time.Duration(got/p.rate)*time.Second + time.Duration(got%p.rate)*time.Second/time.Duration(p.rate)
	return minTime(p.start.Add(p.grace+earned), p.limit)
}

func (p *pacedBody) Read(b []byte) (int, error) {
	if (p.length < 0 || p.got < p.length) && p.got >= p.granted {
		p.granted = p.got + p.rate
		if p.length >= 0 {
			p.granted = min(p.granted, p.length)
		}
		if err := p.rc.SetReadDeadline(p.deadline(p.granted)); err != nil {
			return 0, err
		}
	}
	if p.claim == nil {
		n, err := p.r.Read(b)
		p.got += int64(n)
		return n, err
	}
	// Checked after the deadline is set: an eviction sets the flag, then
	// a deadline in the past, so either this sees the flag or the eviction's
	// deadline comes after this one.
	if p.claim.evicted.Load() {
		return 0, errEvicted
	}
	n, err := p.r.Read(b)
	p.got += int64(n)
	p.claim.got.Store(p.got)
	if err != nil && p.claim.evicted.Load() {
		err = errEvicted
	}
	return n, err
}

// done lifts the deadline once the body is read: the connection's
// background read (which net/http starts to notice a client going away)
// must not time out while the delivery is being stored, or the request's
// context would be cancelled under the publish. The server sets its own
// deadlines again for the next request.
func (p *pacedBody) done() {
	if p.claim != nil {
		p.claim.read()
	}
	_ = p.rc.SetReadDeadline(time.Time{})
}

// refuse makes the connection read no more: a refused request's unread
// body is not waited for (net/http would otherwise read up to 256 KiB of it
// before writing the answer), and the connection is closed after it.
func refuse(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
