package clickhousetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// provisionTimeout bounds scripts/clickhouse.sh ensure. The first run on a
// machine downloads the engine (~180 MB) and compiles the launcher.
const provisionTimeout = 10 * time.Minute

// Server is a ClickHouse started by scripts/clickhouse.sh for this test
// process: clickhouse-local from libchdb.so, serving the native and HTTP
// protocols on loopback ports, with its data in a directory the caller
// chooses. It is tied to the process: if the process dies without stopping
// it, the server notices (its stdin is a pipe held open by this process) and
// shuts itself down.
type Server struct {
	// Addr is the native-protocol address, host:port, for clickhouse-go.
	Addr string
	// HTTP is the base URL of the HTTP interface, e.g. http://127.0.0.1:8123.
	HTTP string
	// PID is the launcher's process id.
	PID int

	dir      string
	root     string
	lifeline *os.File // write end of the server's stdin; closing it stops the server
	stopOnce sync.Once
	stopErr  error
}

// StartServer starts a ClickHouse whose state lives in dir (created if
// needed; a later StartServer on the same dir sees the same databases) and
// stops it in t.Cleanup. Most tests want Addr or NewDatabase instead, which
// share one server; StartServer is for tests that stop or restart ClickHouse.
// A failure to start fails the test under CI=true and skips it otherwise.
func StartServer(t testing.TB, dir string) *Server {
	t.Helper()
	s, err := Start(dir, 0)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("clickhousetest: %v", err)
		}
	})
	return s
}

// Stop shuts the server down cleanly (SIGTERM, then SIGKILL after 30 s) and
// waits for it to exit. Calling Stop again returns the first result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		var stderr bytes.Buffer
		cmd := exec.Command("bash", filepath.Join(s.root, "scripts", "clickhouse.sh"), "stop", "--data", s.dir)
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			s.stopErr = fmt.Errorf("scripts/clickhouse.sh stop --data %s: %w\n%s", s.dir, err, stderr.String())
		}
		// Also stops the server if the script could not.
		s.lifeline.Close()
	})
	return s.stopErr
}

// Start starts a ClickHouse like StartServer, for programs rather than tests
// (the soak tool): the caller stops it. tcpPort, when not 0, is the native
// port to listen on, so that a restarted server keeps its address.
func Start(dir string, tcpPort int) (*Server, error) {
	return StartWith(dir, StartOptions{TCPPort: tcpPort})
}

// StartOptions are Start's settings beyond the data directory.
type StartOptions struct {
	// TCPPort, when not 0, is the native port to listen on.
	TCPPort int
	// ConfigFile, when set, is a ClickHouse server configuration file
	// (remote_servers, macros, ...) handed to clickhouse-local.
	ConfigFile string
}

// StartWith is Start with options.
func StartWith(dir string, o StartOptions) (*Server, error) {
	tcpPort := o.TCPPort
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The server's stdin: it stops when every write end is closed, which the
	// kernel does for us if this process dies. os.Pipe sets close-on-exec, so
	// no other child inherits the write end.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()

	ctx, cancel := context.WithTimeout(context.Background(), provisionTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{filepath.Join(root, "scripts", "clickhouse.sh"), "ensure", "--watch-stdin", "--data", dir}
	if tcpPort != 0 {
		args = append(args, "--tcp-port", strconv.Itoa(tcpPort))
	}
	if o.ConfigFile != "" {
		args = append(args, "--config-file", o.ConfigFile)
	}
	cmd := exec.CommandContext(ctx, "bash", args...)
	cmd.Env = environWithout("CLICKHOUSE_ADDR")
	cmd.Stdin = r
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		w.Close()
		return nil, fmt.Errorf("scripts/clickhouse.sh ensure --data %s: %w\n%s", dir, err, stderr.String())
	}
	vars := parseEnvLines(stdout.String())
	s := &Server{Addr: vars["CLICKHOUSE_ADDR"], HTTP: vars["CLICKHOUSE_HTTP"], dir: dir, root: root, lifeline: w}
	s.PID, _ = strconv.Atoi(vars["CLICKHOUSE_PID"])
	if s.Addr == "" {
		w.Close()
		return nil, fmt.Errorf("scripts/clickhouse.sh ensure printed no CLICKHOUSE_ADDR:\n%s%s", stdout.String(), stderr.String())
	}
	return s, nil
}

// repoRoot finds the module root by walking up from the working directory
// (a package directory under go test) to go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "scripts", "clickhouse.sh")); err != nil {
				return "", fmt.Errorf("%s has go.mod but no scripts/clickhouse.sh", dir)
			}
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func environWithout(name string) []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// parseEnvLines reads the KEY=VALUE lines that scripts/clickhouse.sh prints.
func parseEnvLines(s string) map[string]string {
	vars := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			vars[k] = v
		}
	}
	return vars
}
