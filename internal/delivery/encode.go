package delivery

import (
	"context"

	"github.com/nats-io/nats.go"
)

// Encode returns the message that carries env, with a body of at most
// maxBody bytes. A body that does not fit is compressed with zstd; if it
// still does not fit, it is put in bodies under the webhookId and the
// message carries a reference (HeaderBodyRef) and no body. The object is
// written before the message exists, so a stored message never points at a
// missing body; a retried delivery rewrites the same object. env's Body,
// Encoding and BodyRef are set to what the message carries.
func Encode(ctx context.Context, env *Envelope, maxBody int, bodies *Bodies) (*nats.Msg, error) {
	if err := fit(ctx, env, maxBody, bodies); err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: env.Subject, Header: env.Header(), Data: env.Body}, nil
}

// fit makes env's body fit in limit bytes: compressed, else stored aside.
func fit(ctx context.Context, env *Envelope, limit int, bodies *Bodies) error {
	if len(env.Body) <= limit {
		return nil
	}
	data, encoding := env.Body, ""
	if z := compress(env.Body); len(z) < len(env.Body) {
		data, encoding = z, EncodingZstd
	}
	if len(data) <= limit {
		env.Body, env.Encoding = data, encoding
		return nil
	}
	if err := bodies.put(ctx, env.WebhookID, data); err != nil {
		return err
	}
	env.Body, env.Encoding, env.BodyRef = nil, encoding, env.WebhookID
	return nil
}
