package e2e_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
)

// binary is a crawlhouse command built from ./cmd/<name> and run as a
// process, as operators run it.
type binary struct {
	addr string // where it serves HTTP (its *_LISTEN)
	cmd  *exec.Cmd
	out  *logtest.Buffer
	stop func() // SIGTERM, and wait for it to exit
}

func (s *binary) logs() string { return s.out.String() }

// build builds ./cmd/<name> into a directory of the test and returns its
// path.
func build(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	return bin
}

// startSinkBinary runs the sink binary with env.
func startSinkBinary(t *testing.T, env map[string]string) *binary {
	t.Helper()
	return startBinary(t, "sink", "SINK_LISTEN", env)
}

// startReceiverBinary runs the receiver binary with env and waits until
// it is ready; its webhook URL is "http://" + addr + "/webhooks/crawl".
func startReceiverBinary(t *testing.T, env map[string]string) *binary {
	t.Helper()
	r := startBinary(t, "receiver", "RECEIVER_LISTEN", env)
	waitFor(t, 2*time.Minute, "the receiver binary ready", func() bool { return r.readyz() == http.StatusOK })
	return r
}

// startBinary runs ./cmd/<name> with env, serving HTTP on a free port
// handed over in listenVar.
func startBinary(t *testing.T, name, listenVar string, env map[string]string) *binary {
	t.Helper()
	bin := build(t, name)
	// A port picked here and handed over: the log level stays warn, so the
	// process does not print the address it listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), listenVar + "=" + addr}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	s := &binary{addr: addr, cmd: cmd}
	s.out, s.stop = startProcess(t, cmd)
	return s
}

// startProcess starts cmd with its output in a buffer; stop (also run at
// the end of the test) sends SIGTERM and waits for it to exit, killing it
// after 30 s.
func startProcess(t *testing.T, cmd *exec.Cmd) (out *logtest.Buffer, stop func()) {
	t.Helper()
	out = &logtest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
	}
	t.Cleanup(func() {
		stop()
		// A failed test shows what the process said (the end of it).
		if t.Failed() {
			said := out.String()
			if len(said) > 64<<10 {
				said = "…" + said[len(said)-64<<10:]
			}
			t.Logf("%s said:\n%s", filepath.Base(cmd.Path), said)
		}
	})
	return out, stop
}

func (s *binary) readyz() int {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + s.addr + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// metric returns the value of an unlabelled sample of the process's
// /metrics.
func (s *binary) metric(t *testing.T, name string) string {
	t.Helper()
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return ""
}
