package receiver

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// refusalLog logs requests refused before their sender was authenticated
// (a missing or wrong signature, a body too slow, too large or broken off,
// a sender past its share or a full pool) at a bounded rate: a token
// bucket of RefusalBurst lines, refilled at RefusalRate lines a second.
// Each line written says how many were suppressed since the previous one,
// so a flood cannot fill the log disk and the log still tells its size;
// crawlhouse_webhook_deliveries_total{outcome} counts every refusal.
type refusalLog struct {
	log zerolog.Logger
	now func() time.Time

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int64
}

// RefusalBurst and RefusalRate are the refusal log's bucket: lines let
// through at once, and lines a second after that.
const (
	RefusalBurst = 20
	RefusalRate  = 1.0 // lines a second, sustained
)

func newRefusalLog(log zerolog.Logger, now func() time.Time) *refusalLog {
	return &refusalLog{log: log, now: now, tokens: RefusalBurst, last: now()}
}

// refused logs one refusal, or counts it as suppressed when the bucket is
// empty. remote is the client address; err says why (never a secret: the
// signature errors do not repeat the header).
func (r *refusalLog) refused(outcome, remote string, err error) {
	r.mu.Lock()
	now := r.now()
	if d := now.Sub(r.last); d > 0 {
		r.tokens = min(RefusalBurst, r.tokens+d.Seconds()*RefusalRate)
	}
	r.last = now
	if r.tokens < 1 {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	r.tokens--
	suppressed := r.suppressed
	r.suppressed = 0
	r.mu.Unlock()
	r.log.Warn().Err(err).Str("outcome", outcome).Str("remote", remote).Int64("suppressed", suppressed).
		Msg("delivery refused before authentication")
}
