// Package clickhousetest gives tests a real ClickHouse: the engine itself,
// not a mock, reached over the native protocol with clickhouse-go v2.
//
// The server comes from CLICKHOUSE_ADDR when that answers (`make test` starts
// one shared instance with scripts/clickhouse.sh and exports it). Otherwise
// the first call to Addr in a test binary starts one with that script, for
// the whole process, and RunMain stops it. Each test isolates itself in its
// own database:
//
//	func TestMain(m *testing.M) { clickhousetest.RunMain(m) }
//
//	func TestSink(t *testing.T) {
//		addr, db := clickhousetest.NewDatabase(t)
//		conn := clickhousetest.Open(t, db)
//		...
//	}
//
// When no ClickHouse can be had, tests fail under CI=true and are skipped
// with the reason otherwise.
package clickhousetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// EnvAddr names the environment variable holding the native-protocol
// address(es) of a running ClickHouse, host:port, comma-separated.
const EnvAddr = "CLICKHOUSE_ADDR"

// shared is the process-wide ClickHouse: the one in CLICKHOUSE_ADDR or the
// one this process started. It is resolved once; a failure is remembered.
var shared struct {
	mu     sync.Mutex
	done   bool
	addr   string
	err    error
	server *Server // non-nil when this process started it
	dir    string  // its temporary data directory
	admin  driver.Conn
}

// Addr returns the native-protocol address of a running ClickHouse, starting
// one for this test process on first use if CLICKHOUSE_ADDR is unset or does
// not answer. A process that may start one must call RunMain from TestMain.
// Without a ClickHouse, Addr fails the test under CI=true and skips it
// otherwise.
func Addr(t testing.TB) string {
	t.Helper()
	addr, err := sharedAddr(t)
	if err != nil {
		unavailable(t, err)
	}
	return addr
}

// HTTPURL returns the base URL of the HTTP interface of the ClickHouse
// that Addr returns (CLICKHOUSE_HTTP beside CLICKHOUSE_ADDR, or the one this
// process started). Without one it fails like Addr.
func HTTPURL(t testing.TB) string {
	t.Helper()
	Addr(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server != nil {
		return shared.server.HTTP
	}
	u := os.Getenv("CLICKHOUSE_HTTP")
	if u == "" {
		unavailable(t, errors.New("CLICKHOUSE_HTTP is not set beside "+EnvAddr))
	}
	return u
}

func sharedAddr(t testing.TB) (string, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.done {
		return shared.addr, shared.err
	}
	shared.done = true
	if env := os.Getenv(EnvAddr); env != "" {
		err := ping(env)
		if err == nil {
			shared.addr = env
			return shared.addr, nil
		}
		t.Logf("clickhousetest: %s=%s does not answer (%v); starting a ClickHouse for this test process", EnvAddr, env, err)
	}
	dir, err := os.MkdirTemp("", "clickhousetest-")
	if err != nil {
		shared.err = err
		return "", err
	}
	start := time.Now()
	s, err := Start(dir, 0)
	if err != nil {
		os.RemoveAll(dir)
		shared.err = err
		return "", err
	}
	t.Logf("clickhousetest: started ClickHouse on %s in %v (data %s)", s.Addr, time.Since(start).Round(time.Millisecond), dir)
	shared.server, shared.dir, shared.addr = s, dir, s.Addr
	return shared.addr, nil
}

// RunMain runs the tests and then stops the ClickHouse that Addr may have
// started for this process, and exits with the tests' status. Call it from
// TestMain in every package that uses this package:
//
//	func TestMain(m *testing.M) { clickhousetest.RunMain(m) }
//
// t.Cleanup cannot do this: the server outlives any single test.
func RunMain(m *testing.M) {
	code := m.Run()
	if err := shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "clickhousetest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func shutdown() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.admin != nil {
		shared.admin.Close()
		shared.admin = nil
	}
	if shared.server == nil {
		return nil
	}
	err := shared.server.Stop()
	shared.server = nil
	os.RemoveAll(shared.dir)
	return err
}

// NewDatabase creates a database with a fresh name derived from the test's
// (t_<test name>_<random>) on the shared ClickHouse, drops it when the test
// ends, and returns the server address and the database name.
func NewDatabase(t testing.TB) (addr, database string) {
	t.Helper()
	addr = Addr(t)
	admin, err := adminConn(addr)
	if err != nil {
		t.Fatalf("clickhousetest: %v", err)
	}
	database = databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.Exec(ctx, "CREATE DATABASE "+quoteIdent(database)); err != nil {
		t.Fatalf("clickhousetest: create database %s: %v", database, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(database)+" SYNC"); err != nil {
			t.Errorf("clickhousetest: drop database %s: %v", database, err)
		}
	})
	return addr, database
}

// Open returns a clickhouse-go native connection (a pool) to database on the
// shared ClickHouse, checked with a ping and closed when the test ends.
func Open(t testing.TB, database string) driver.Conn {
	t.Helper()
	addr := Addr(t)
	conn, err := clickhouse.Open(Options(addr, database))
	if err != nil {
		t.Fatalf("clickhousetest: open %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("clickhousetest: ping %s: %v", addr, err)
	}
	return conn
}

// Options returns clickhouse-go options for database at addr (comma-separated
// host:port list), with CLICKHOUSE_USER and CLICKHOUSE_PASSWORD from the
// environment when set.
func Options(addr, database string) *clickhouse.Options {
	user := os.Getenv("CLICKHOUSE_USER")
	if user == "" {
		user = "default"
	}
	return &clickhouse.Options{
		Addr: strings.Split(addr, ","),
		Auth: clickhouse.Auth{
			Database: database,
			Username: user,
			Password: os.Getenv("CLICKHOUSE_PASSWORD"),
		},
		DialTimeout: 10 * time.Second,
	}
}

func adminConn(addr string) (driver.Conn, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.admin != nil {
		return shared.admin, nil
	}
	conn, err := clickhouse.Open(Options(addr, "default"))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", addr, err)
	}
	shared.admin = conn
	return conn, nil
}

// ping reports whether a ClickHouse answers the native protocol at addr.
func ping(addr string) error {
	opts := Options(addr, "default")
	opts.DialTimeout = 5 * time.Second
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return conn.Ping(ctx)
}

// unavailable ends a test that cannot get a ClickHouse. It fails, in CI and
// everywhere else: a missing dependency must never pass silently.
func unavailable(t testing.TB, err error) {
	t.Helper()
	t.Fatalf("clickhousetest: no ClickHouse (set CLICKHOUSE_ADDR, or see scripts/clickhouse.sh ensure): %v", err)
}

// databaseName makes t_<sanitized test name>_<8 hex digits>.
func databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 40 {
		name = name[:40]
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return "t_" + name + "_" + hex.EncodeToString(rnd[:])
}

func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "\\`") + "`"
}

// Count runs a query that returns one count, failing the test on error.
func Count(t testing.TB, conn driver.Conn, query string, args ...any) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TryCount is Count for polling: an error (ClickHouse restarting, a table
// not created yet) reads as the largest count, which no poll waits for.
func TryCount(conn driver.Conn, query string, args ...any) uint64 {
	var n uint64
	if err := conn.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		return ^uint64(0)
	}
	return n
}
