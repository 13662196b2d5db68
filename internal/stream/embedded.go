package stream

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig is the in-process JetStream server of NATS_EMBEDDED=true.
type EmbeddedConfig struct {
	// StoreDir is the server's store directory.
	StoreDir string
	// SyncAlways makes the server fsync every write before it sends the
	// PubAck.
	//
	// JetStream's default is to flush to disk every two minutes: a PubAck
	// then means "in the page cache", and an OS crash or power failure loses
	// what was acknowledged since the last flush. crawlhouse answers the
	// sender 2xx only for what it will not lose, so the embedded server syncs
	// by default and the benchmark reports what that costs.
	SyncAlways bool
	// SyncInterval is how often the server syncs its store when it does
	// not sync always (nats-server's default, when zero, is two minutes).
	// A write-ahead log in front of a lazy server keeps its entries longer
	// than this.
	SyncInterval time.Duration
}

// StartEmbedded starts a JetStream server in this process, listening on the
// host and port of the first URL of cfg.URL (port -1 or 0 picks a free
// port: the server's ClientURL tells which), with cfg's token or user and
// password required of clients when they are set. It returns once the
// server accepts connections; the caller shuts it down.
func StartEmbedded(cfg Config, ec EmbeddedConfig) (*server.Server, error) {
	host, port, err := listenAddr(cfg.URL)
	if err != nil {
		return nil, err
	}
	if ec.StoreDir == "" {
		return nil, fmt.Errorf("embedded NATS: NATS_STORE_DIR must not be empty")
	}
	opts := &server.Options{
		ServerName:   "crawlhouse-embedded",
		Host:         host,
		Port:         port,
		JetStream:    true,
		StoreDir:     ec.StoreDir,
		SyncAlways:   ec.SyncAlways,
		SyncInterval: ec.SyncInterval,
		NoSigs:       true,
		NoLog:        true,
		// Bodies above the default 1 MB max payload are compressed or stored
		// in the object store by the publisher, as with any server.
		Authorization: cfg.Token,
		Username:      cfg.User,
		Password:      cfg.Password,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded NATS: not ready to accept connections on %s:%d within 10s", host, port)
	}
	return srv, nil
}

// listenAddr is the host and port of the first server URL. It is parsed by
// hand: net/url refuses the port -1 ("any free port") that tests use.
func listenAddr(urls string) (string, int, error) {
	hostport := strings.TrimSpace(strings.Split(urls, ",")[0])
	if i := strings.Index(hostport, "://"); i >= 0 {
		hostport = hostport[i+3:]
	}
	if i := strings.LastIndex(hostport, "@"); i >= 0 {
		hostport = hostport[i+1:]
	}
	hostport = strings.TrimSuffix(hostport, "/")
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		host, p = hostport, "4222"
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("NATS_URL: port %q is not a number", p)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}
