package schema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/rs/zerolog"
)

// lockRetry is how often a migrator waiting for the lock tries again.
const lockRetry = time.Second

// migrationLock is held by the one migrator of a database at a time.
//
// Migrations are not transactional (ClickHouse DDL is not), and some steps
// check a state and then act on it (0010 moves parts and swaps tables while
// the new table still has the new setting): two sinks starting at once would
// interleave those and could swap back or drop a table the other just filled.
// So a migrator holds a lock for as long as it runs DDL.
//
// The lock is a query ClickHouse itself refuses to run twice: a SELECT that
// streams a row every half second for as long as it is read, under a fixed
// query id made of the database name. A second query with that id is refused
// (QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING) while the first runs, and the first
// ends when its holder releases it, and also when the holder dies: its
// connection closes and the server cancels the query. No lease to expire, no
// clock: a killed sink never leaves the archive locked.
//
// The lock is kept by one server: on a cluster, sinks migrating through
// different nodes do not exclude each other (docs/deployment.md).
type migrationLock struct {
	stop context.CancelFunc
	done chan struct{}
	// lost is closed when the query ends while still held: ClickHouse
	// restarted, the connection broke, a limit stopped it.
	lost chan struct{}
	err  error
}

// lockQueryID is the id of the lock query for database db.
func lockQueryID(db string) string { return "crawlhouse-migrate-" + db }

// lockMigrations waits until it holds the migration lock of cfg.Database on
// conn, or ctx ends. It logs once that it waits, and for whom.
func lockMigrations(ctx context.Context, conn driver.Conn, cfg archive.Config, log zerolog.Logger) (*migrationLock, error) {
	id := lockQueryID(cfg.Database)
	waited := false
	for {
		l, err := tryLock(ctx, conn, id)
		if err == nil {
			if waited {
				log.Info().Msg("migration lock taken")
			}
			return l, nil
		}
		var exc *clickhouse.Exception
		if !errors.As(err, &exc) || exc.Code != codeQueryIDRunning {
			return nil, fmt.Errorf("take the migration lock: %w", err)
		}
		if !waited {
			waited = true
			log.Info().Str("holder", lockHolder(ctx, conn, id)).Msg("another migrator holds the migration lock; waiting for it")
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the migration lock held by %s: %w", lockHolder(context.WithoutCancel(ctx), conn, id), ctx.Err())
		case <-time.After(lockRetry):
		}
	}
}

// tryLock starts the lock query; it fails with QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING
// while another migrator holds the lock.
func tryLock(ctx context.Context, conn driver.Conn, id string) (*migrationLock, error) {
	qctx, stop := context.WithCancel(ctx)
	qctx = clickhouse.Context(qctx, clickhouse.WithQueryID(id), clickhouse.WithSettings(clickhouse.Settings{
		// Refuse, never replace, a running query of the same id; never time
		// out, however long the migration takes.
		"replace_running_query": 0,
		"max_execution_time":    0,
		"max_block_size":        1,
	}))
	rows, err := conn.Query(qctx, "SELECT sleepEachRow(0.5) FROM system.numbers")
	if err != nil {
		stop()
		return nil, err
	}
	l := &migrationLock{stop: stop, done: make(chan struct{}), lost: make(chan struct{})}
	go func() {
		defer close(l.done)
		for rows.Next() {
		}
		_ = rows.Close()
		if qctx.Err() == nil {
			l.err = rows.Err()
			if l.err == nil {
				l.err = errors.New("the lock query ended")
			}
			close(l.lost)
		}
	}()
	return l, nil
}

// check is nil while the lock is held, else why it was lost.
func (l *migrationLock) check() error {
	select {
	case <-l.lost:
		return fmt.Errorf("%w: %w", ErrLockLost, l.err)
	default:
		return nil
	}
}

// release ends the lock query and waits until the driver has let it go.
func (l *migrationLock) release() {
	l.stop()
	<-l.done
}

// lockHolder describes who runs the lock query, for the log.
func lockHolder(ctx context.Context, conn driver.Conn, id string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var who string
	err := conn.QueryRow(ctx, "SELECT any(concat(user, '@', toString(address), ' (', client_hostname, ', running ', toString(round(elapsed)), ' s)')) FROM system.processes WHERE query_id = ?", id).Scan(&who)
	if err != nil || who == "" {
		return "another sink"
	}
	return who
}
