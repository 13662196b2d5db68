package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Connect opens a connection to the configured servers and returns it with
// its JetStream context. The connection reconnects forever: a JetStream
// outage makes publishes fail (and the receiver answer 503) but never needs
// a restart. The first connection is retried in the background too, so a
// binary starts even while NATS is still coming up; readiness reports it.
// extra options are applied last (the receiver turns off the reconnect
// buffer; an embedded server is reached in process).
func Connect(cfg Config, name string, log zerolog.Logger, extra ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			// Close disconnects too, with no error: a normal exit is
			// not worth a warning.
			if err == nil || c.IsClosed() {
				log.Debug().Msg("nats connection closed")
				return
			}
			log.Warn().Err(err).Msg("nats disconnected")
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info().Str("server", c.ConnectedUrlRedacted()).Msg("nats reconnected")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn().Err(err).Msg("nats error")
		}),
	}
	if cfg.Creds != "" {
		opts = append(opts, nats.UserCredentials(cfg.Creds))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	opts = append(opts, extra...)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS: %w", err)
	}
	// Asynchronous publishes whose PubAck never comes (the server went away)
	// are dropped after this, so they cannot pile up; the publisher's caller
	// has its own, shorter deadline (RECEIVER_PUBLISH_TIMEOUT).
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

// Ready reports whether JetStream answers: the connection is up and the
// info of the stream (of every partition's) can be read.
func Ready(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	for _, l := range cfg.Lanes() {
		if _, err := js.Stream(ctx, l.Stream); err != nil {
			return fmt.Errorf("stream %s: %w", l.Stream, err)
		}
	}
	return nil
}
