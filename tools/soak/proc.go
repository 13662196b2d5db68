package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one crawlhouse binary run as its own process, as an operator runs
// it: configured by environment, logging to a file, stopped by signal. Its
// log file is appended to across restarts.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  string
	// health is the base URL of its /healthz and /readyz.
	health string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	peak int64 // highest RSS seen, bytes
	rss  []int64
}

// start runs the process and waits until /readyz answers 200.
func (p *proc) start(ctx context.Context) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(minimalEnv(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		f.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	if err := waitReady(ctx, p.health+"/readyz", 90*time.Second, done); err != nil {
		p.kill()
		return fmt.Errorf("%s: %w (log: %s)", p.name, err, p.log)
	}
	return nil
}

// kill ends the process with SIGKILL, as a crash or an OOM kill would.
func (p *proc) kill() { p.signal(syscall.SIGKILL, 0) }

// stop asks the process to shut down gracefully, and kills it after 30 s.
func (p *proc) stop() { p.signal(syscall.SIGTERM, 30*time.Second) }

func (p *proc) signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-done:
			return
		case <-time.After(grace):
			_ = cmd.Process.Kill()
		}
	}
	<-done
}

// sample records the process's resident set size.
func (p *proc) sample() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	if rss, err := rssBytes(p.cmd.Process.Pid); err == nil {
		p.rss = append(p.rss, rss)
		p.peak = max(p.peak, rss)
	}
}

// rssBytes reads VmRSS of a process from /proc.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// waitReady polls url until it answers 200, the process exits, or timeout.
func waitReady(ctx context.Context, url string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s", url, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errors.New("exited before it was ready")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// minimalEnv is what a child inherits: only PATH, HOME and TMPDIR, so that
// no CLICKHOUSE_* or NATS_* of the caller's shell leaks into the run.
func minimalEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
