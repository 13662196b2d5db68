package e2e_test

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func jetstreamNew(nc *nats.Conn) (jetstream.JetStream, error) { return jetstream.New(nc) }

// dlqMsgs is the number of messages in the dead-letter stream (0 if absent).
func dlqMsgs(ctx context.Context, js jetstream.JetStream) uint64 {
	st, err := js.Stream(ctx, "CRAWL_DLQ")
	if err != nil {
		return 0
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.Msgs
}
