package receiver

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/crawlhouse/crawlhouse/internal/logs"
)

// refusalLog logs requests refused before their sender was authenticated
// (a missing or wrong signature, a body too slow, too large or broken off,
// a sender past its share or a full pool) at a bounded rate: a token
// bucket of RefusalBurst lines, refilled at RefusalRate lines a second.
// Each line written says how many were suppressed since the previous one,
// so a flood cannot fill the log disk and the log still tells its size;
// crawlhouse_webhook_deliveries_total{outcome} counts every refusal.
type refusalLog struct {
	log     zerolog.Logger
	bounded *logs.Bounded
}

// RefusalBurst and RefusalRate are the refusal log's bucket: lines let
// through at once, and lines a second after that.
const (
	RefusalBurst = 20
	RefusalRate  = 1.0 // lines a second, sustained
)

func newRefusalLog(log zerolog.Logger, now func() time.Time) *refusalLog {
	return &refusalLog{log: log, bounded: logs.NewBounded(RefusalBurst, RefusalRate, now)}
}

// refused logs one refusal, or counts it as suppressed when the bucket is
// empty. remote is the client address; err says why (never a secret: the
// signature errors do not repeat the header).
func (r *refusalLog) refused(outcome, remote string, err error) {
	ok, suppressed := r.bounded.Allow()
	if !ok {
		return
	}
	r.log.Warn().Err(err).Str("outcome", outcome).Str("remote", remote).Int64("suppressed", suppressed).
		Msg("delivery refused before authentication")
}
