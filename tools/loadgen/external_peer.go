package main

import (
	"io"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// peer stands in for a widely used ingestion agent (Redpanda Connect /
// Benthos: an http_server input, a nats_jetstream output): read the body,
// publish it to JetStream, answer 200. No signature check, no validation,
// no Nats-Msg-Id (so no deduplication). The Go module proxy answers 403 for
// github.com/redpanda-data/benthos/v4 and github.com/redpanda-data/connect/v4,
// so the real agent is built from source trees (scripts/build-agent.sh) and
// measured beside these when a binary of it is given (-agent,
// external_agent.go); the peers are its best case: its http_server and
// PublishMsg without the pipeline between them.
//
// Two configurations:
//   - answering before the PubAck (acked false), as the agent was measured
//     when its figure became the target: the publish is asynchronous, at most
//     1024 PubAcks outstanding (past that a publish waits for room);
//   - answering after it (acked true), as the agent ships: its http_server
//     input answers once the output has written the message, and the
//     nats_jetstream output's write is a synchronous PublishMsg, which
//     returns with the PubAck (internal/impl/io/input_http_server.go and
//     internal/impl/nats/output_jetstream.go in redpanda-data/connect).
//
// It runs on net/http and the same nats.go client as the receiver, with a
// connection of its own.
type peer struct {
	addr string
	srv  *http.Server
	nc   *nats.Conn
}

// maxPeerBody bounds a body the peer reads, as the receiver's limit does.
const maxPeerBody = 10 << 20

func startPeer(url, subject string, acked bool) (*peer, error) {
	nc, err := nats.Connect(url, nats.Name("loadgen-peer"))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024))
	if err != nil {
		nc.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		nc.Close()
		return nil, err
	}
	answer := []byte(`{"status":"accepted"}` + "\n")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxPeerBody))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		msg := &nats.Msg{Subject: subject, Data: body}
		if acked {
			_, err = js.PublishMsg(r.Context(), msg)
		} else {
			_, err = js.PublishMsgAsync(msg, jetstream.WithStallWait(5*time.Second))
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &peer{addr: ln.Addr().String(), srv: srv, nc: nc}, nil
}

func (p *peer) close() {
	_ = p.srv.Close()
	p.nc.Close()
}
