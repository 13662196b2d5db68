package receivercmd

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/crawlhouse/crawlhouse/internal/wal"
)

// Config is the receiver binary's configuration, read from the environment
// (config/environment.md): the HTTP side's (receiver.Config) and what the
// binary itself sets up around it: logging, tracing, the listener, the
// embedded JetStream server, the publisher and the write-ahead log. The
// tags are kelseyhightower/envconfig's; Load reads them through an
// injectable getenv so that tests run the binary as users start it.
type Config struct {
	receiver.Config
	LogConfig
	TracingConfig

	// Listen is the HTTP listen address. Port 0 picks a free port; Run
	// reports the bound address (see Options.Ready).
	Listen string `envconfig:"RECEIVER_LISTEN" default:":8080" desc:"HTTP listen address"`
	// GroupCommit lets concurrent deliveries share one JetStream atomic
	// batch and so one data fsync: "true", "false" or "auto" (the default),
	// which is on exactly when the receiver runs the server itself
	// (NATS_EMBEDDED) and that server syncs always (NATS_SYNC_ALWAYS). On a
	// server that syncs always it carries more than without; on a lazy
	// server each batch's staging store costs far more than the fsync it
	// saves (docs/benchmarks.md has the figures). An external server's sync
	// setting is not visible from here: set true for a single server with
	// sync_interval: always (as in docker-compose.yml).
	GroupCommit string `envconfig:"RECEIVER_GROUP_COMMIT" default:"auto" desc:"concurrent deliveries share one JetStream atomic batch, and so one fsync: true, false, or auto (on with an embedded server that syncs always)"`

	// Embedded runs nats-server in process on NATS_URL's host:port.
	Embedded bool `envconfig:"NATS_EMBEDDED" default:"false" desc:"run an in-process JetStream server listening on NATS_URL's host:port"`
	// StoreDir is the embedded server's store directory.
	StoreDir string `envconfig:"NATS_STORE_DIR" default:"./var/nats" desc:"store directory of the embedded server"`
	// SyncAlways makes the embedded server fsync before each PubAck.
	SyncAlways bool `envconfig:"NATS_SYNC_ALWAYS" default:"true" desc:"the embedded server fsyncs before each PubAck"`
	// SyncInterval is how often the embedded server syncs its store when it
	// does not sync always. It is set explicitly (nats-server's own default
	// is two minutes): it bounds what a power loss takes from a lazy server
	// without the write-ahead log. The log does not rely on it: it syncs
	// the store itself before it trims (stream.StoreSyncer).
	SyncInterval time.Duration `envconfig:"NATS_SYNC_INTERVAL" default:"100ms" desc:"how often the embedded server syncs its store when NATS_SYNC_ALWAYS=false"`

	// WALDir turns the write-ahead log on (internal/wal): every delivery
	// is written there with a synced commit that concurrent deliveries
	// share, alongside its publish, and answered 2xx only once both are
	// done. With it the stream may sync lazily and a 2xx still means the
	// delivery is on stable storage. Empty: off.
	WALDir string `envconfig:"RECEIVER_WAL_DIR" desc:"directory of the write-ahead log; empty: off"`
	// An entry leaves the log once it is known durable in the stream: its
	// delivery answered, then the embedded server's store synced by the
	// receiver (stream.StoreSyncer). An external server's PubAck is taken
	// as durable: it must sync always (sync_interval: always).
	//
	// WALMaxBytes bounds the log on disk; beyond it deliveries get 503.
	// The log's memtable is a quarter of it (64 MiB at most); values below
	// wal.MinMaxBytes, or below four of the largest bodies, are refused.
	WALMaxBytes int64 `envconfig:"RECEIVER_WAL_MAX_BYTES" default:"2147483648" desc:"size bound of the write-ahead log on disk; beyond it deliveries get 503; at least 4 MiB and four times WEBHOOK_MAX_BODY_BYTES"`
	// WALCommitDelay and WALCommitSiblings: under load (at least that
	// many deliveries in flight) the log waits that long before each
	// fsync so that more deliveries share it (wal.Options.CommitDelay).
	WALCommitDelay    time.Duration `envconfig:"RECEIVER_WAL_COMMIT_DELAY" default:"500us" desc:"how long the write-ahead log waits before an fsync when RECEIVER_WAL_COMMIT_SIBLINGS or more deliveries are in flight, so that more share it; 0: never"`
	WALCommitSiblings int           `envconfig:"RECEIVER_WAL_COMMIT_SIBLINGS" default:"64" desc:"deliveries in flight from which the write-ahead log waits RECEIVER_WAL_COMMIT_DELAY before an fsync"`
}

// LogConfig and TracingConfig name the embedded parts of Config: both
// packages call their type Config, and Go names an embedded field after its
// type.
type (
	LogConfig     = logs.Config
	TracingConfig = tracing.Config
)

// Load reads a Config through getenv (os.Getenv in the binary, a map in
// tests), applying the defaults, with envconfig doing the decoding (see
// internal/env). It does not validate: see Config.Validate.
func Load(getenv func(string) string) (Config, error) {
	var c Config
	if err := env.Load(getenv, &c); err != nil {
		return c, err
	}
	// The HTTP side's Load also notes which of its settings were given.
	rc, err := receiver.Load(getenv)
	c.Config = rc
	return c, err
}

// Validate reports every invalid setting at once, joined.
func (c Config) Validate() error {
	errs := []error{c.LogConfig.Validate(), c.TracingConfig.Validate(), c.Config.Validate()}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		// The value is not repeated: a misplaced secret would be.
		errs = append(errs, errors.New("RECEIVER_LISTEN: is not host:port (e.g. :8080)"))
	}
	if _, err := c.GroupCommitOn(); err != nil {
		errs = append(errs, err)
	}
	if c.SyncInterval <= 0 || c.SyncInterval > time.Hour {
		errs = append(errs, fmt.Errorf("NATS_SYNC_INTERVAL: %s must be above 0 and at most 1h", c.SyncInterval))
	}
	if strings.TrimSpace(c.WALDir) != "" {
		// The log holds its memtable (a quarter of the bound) and up to
		// one more being flushed; a bound below what one largest delivery
		// needs would refuse it for ever.
		if least := max(wal.MinMaxBytes, 4*c.MaxBodyBytes); c.WALMaxBytes < least {
			errs = append(errs, fmt.Errorf("RECEIVER_WAL_MAX_BYTES: %d is below %d (4 MiB, and four times WEBHOOK_MAX_BODY_BYTES): the log could not hold its memtable and the largest delivery, and would answer 503 while empty", c.WALMaxBytes, least))
		}
		if c.WALCommitDelay < 0 || c.WALCommitDelay > 100*time.Millisecond {
			errs = append(errs, fmt.Errorf("RECEIVER_WAL_COMMIT_DELAY: %s must be between 0 and 100ms", c.WALCommitDelay))
		}
		if c.WALCommitSiblings < 1 || c.WALCommitSiblings > 1<<20 {
			errs = append(errs, fmt.Errorf("RECEIVER_WAL_COMMIT_SIBLINGS: %d must be between 1 and %d", c.WALCommitSiblings, 1<<20))
		}
	}
	if c.Embedded && strings.TrimSpace(c.StoreDir) == "" {
		errs = append(errs, errors.New("NATS_STORE_DIR: must not be empty with NATS_EMBEDDED=true"))
	}
	return errors.Join(errs...)
}

// GroupCommitOn resolves RECEIVER_GROUP_COMMIT (see Config.GroupCommit).
func (c Config) GroupCommitOn() (bool, error) {
	v := strings.ToLower(strings.TrimSpace(c.GroupCommit))
	if v == "auto" || v == "" {
		return c.Embedded && c.SyncAlways, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("RECEIVER_GROUP_COMMIT: %q is not true, false or auto", c.GroupCommit)
	}
	return on, nil
}
