package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/nats-io/nats.go/jetstream"
)

// decoded is one message of a batch, decoded.
type decoded struct {
	msg   jetstream.Msg
	tries uint64
	// seq is the message's sequence in the events stream.
	seq  uint64
	env  *delivery.Envelope
	rows archive.Rows
	// failed counts its new failed pages (Consumer.newFailures sets it
	// at insert): after commit they count in crawlhouse_page_failures_total
	// and wake the alerter.
	failed int
}

// decodeAll decodes msgs; the undecodable are dead-lettered or nak'ed here
// and left out.
func (c *Consumer) decodeAll(ctx context.Context, msgs []jetstream.Msg) []*decoded {
	var ok []*decoded
	for _, m := range msgs {
		d, err := c.decode(ctx, m)
		switch {
		case err == nil:
			ok = append(ok, d)
		case errors.Is(err, errPermanent):
			c.deadLetter(ctx, m, err)
		default:
			c.nak(m, err)
		}
	}
	return ok
}

// errPermanent marks a message that can never be decoded.
var errPermanent = errors.New("undecodable message")

// decode reads a message into rows.
func (c *Consumer) decode(ctx context.Context, m jetstream.Msg) (*decoded, error) {
	d := &decoded{msg: m, tries: 1}
	md, err := m.Metadata()
	if err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", errPermanent, err)
	}
	d.tries, d.seq = md.NumDelivered, md.Sequence.Stream
	env, err := delivery.Decode(m.Subject(), m.Headers(), m.Data())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPermanent, err)
	}
	if env.ReceivedAt.IsZero() {
		env.ReceivedAt = md.Timestamp
	}
	d.env = env
	body, err := c.bodies.Open(ctx, env)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("%w: %v", errPermanent, err)
		}
		return nil, err
	}
	ev, err := decodeEvent(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPermanent, err)
	}
	if env.CrawlID == "" {
		env.CrawlID = ev.ID
	}
	if env.Type == "" {
		env.Type = ev.Type
	}
	d.rows, err = archive.EventRows(ev, body, env.ReceivedAt)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPermanent, err)
	}
	return d, nil
}

// decodeEvent parses a delivery. The receiver validated it (events.Validate)
// before storing it, so the sink does not run the full validation again (it
// would parse each body twice more); events.DecodeAccepted decodes leniently,
// so that every delivery the receiver acknowledged is archived, and checks
// the type; archive.EventRows checks the ids.
func decodeEvent(body []byte) (*events.Event, error) {
	return events.DecodeAccepted(body)
}
