package archive_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/rs/zerolog"
)

func TestSupportedServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, found string
		ok          bool
	}{
		{"oldest", "26.2.1.1", true},
		{"LTS inside", "26.3.5.12", true},
		{"newest tested", "26.7.2.1", true},
		{"month before the oldest", "26.1.4.2", false},
		{"previous LTS", "25.8.12.3", false},
		{"month after the newest", "26.8.1.1", false},
		{"next year", "27.1.1.1", false},
		{"year.month alone", "26.5", true},
		{"no month", "26", false},
		{"not numbers", "head.of.master", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := archive.SupportedServer(tt.found)
			if tt.ok {
				if err != nil {
					t.Fatalf("SupportedServer(%q) = %v, want nil", tt.found, err)
				}
				return
			}
			if !errors.Is(err, archive.ErrUnsupportedServer) {
				t.Fatalf("SupportedServer(%q) = %v, want ErrUnsupportedServer", tt.found, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.found) || !strings.Contains(msg, "26.2 to 26.7") || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming %q and the range 26.2 to 26.7", msg, tt.found)
			}
		})
	}
}

// statementLog wraps a connection to the real ClickHouse and records, in
// order, every statement sent through it. version, when set, is what the
// server's version() answers instead of its own.
type statementLog struct {
	driver.Conn
	version string

	mu    sync.Mutex
	stmts []string
}

func (c *statementLog) record(q string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stmts = append(c.stmts, strings.TrimSpace(q))
}

func (c *statementLog) statements() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.stmts...)
}

func (c *statementLog) Exec(ctx context.Context, q string, args ...any) error {
	c.record(q)
	return c.Conn.Exec(ctx, q, args...)
}

func (c *statementLog) Query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	c.record(q)
	return c.Conn.Query(ctx, q, args...)
}

func (c *statementLog) QueryRow(ctx context.Context, q string, args ...any) driver.Row {
	c.record(q)
	if c.version != "" && q == "SELECT version()" {
		return versionRow(c.version)
	}
	return c.Conn.QueryRow(ctx, q, args...)
}

// versionRow is the answer of a server whose version() is its value.
type versionRow string

func (r versionRow) Err() error { return nil }

func (r versionRow) Scan(dest ...any) error {
	*dest[0].(*string) = string(r)
	return nil
}

func (r versionRow) ScanStruct(any) error { return errors.New("versionRow: not a struct") }

// TestMigrateChecksServerFirst: on the tested release the check passes and
// is the first statement a migration sends; on a release outside the range
// Migrate stops at it, having run nothing else, and says which version it
// found and which it needs.
func TestMigrateChecksServerFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	conn, cfg := archivetest.OpenDatabase(t)
	logged := &statementLog{Conn: conn}
	applied, err := schema.Migrate(ctx, logged, cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("Migrate on the tested ClickHouse: %v", err)
	}
	if len(applied) == 0 {
		t.Fatal("Migrate applied nothing to a new database")
	}
	stmts := logged.statements()
	if len(stmts) < 2 || stmts[0] != "SELECT version()" {
		t.Fatalf("first statements %q, want SELECT version() before any other", stmts[:min(3, len(stmts))])
	}
	if got := strings.Count(strings.Join(stmts, "\n"), "SELECT version()"); got != 1 {
		t.Errorf("version() asked %d times, want once", got)
	}

	old, oldCfg := archivetest.OpenDatabase(t)
	refused := &statementLog{Conn: old, version: "25.8.12.3"}
	applied, err = schema.Migrate(ctx, refused, oldCfg, zerolog.Nop())
	if !errors.Is(err, archive.ErrUnsupportedServer) {
		t.Fatalf("Migrate on 25.8 = %v, want ErrUnsupportedServer", err)
	}
	if want := "ClickHouse 25.8.12.3 found; crawlhouse runs on ClickHouse 26.2 to 26.7"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to say %q", err, want)
	}
	if len(applied) != 0 {
		t.Errorf("applied %v on a refused server", applied)
	}
	if got := refused.statements(); len(got) != 1 {
		t.Errorf("statements sent to a refused server: %q, want only SELECT version()", got)
	}
	var tables uint64
	if err := old.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ?", oldCfg.Database).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("%d tables created on a refused server", tables)
	}
}

// TestSupportedServersDocumented: the range the binaries enforce is the one
// README, docs/deployment.md and the chart's values name.
func TestSupportedServersDocumented(t *testing.T) {
	t.Parallel()
	want := "ClickHouse " + archive.SupportedServers()
	for _, f := range []string{"../../README.md", "../../docs/deployment.md", "../../charts/crawlhouse/values.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.NewReplacer("**", "", "\n# ", " ", "\n", " ").Replace(string(b))
		if !strings.Contains(text, want) {
			t.Errorf("%s does not name the supported range %q", f, want)
		}
	}
}
