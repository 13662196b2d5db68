package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// agent is the ingestion agent itself, when a binary of it is given
// (-agent): Redpanda Connect with an http_server input and a
// nats_jetstream output, as configured below and otherwise at its
// defaults. Its http_server answers once the output has written the
// message, and nats_jetstream writes with a synchronous PublishMsg that
// returns with the PubAck: what external_peer.go's acked peer stands in
// for, with the agent's own pipeline (transactions, metrics, batching
// policy) around it. It runs as a process of its own; its CPU and system
// calls are added to the load generator's for its phase.
type agent struct {
	addr string
	pid  int
	stop func()
}

// agentConfig is the agent's configuration: its HTTP server on addr at the
// receiver's path, the stream's subject on the server at natsURL, and no
// HTTP endpoint of its own (health and metrics).
const agentConfig = `http:
  enabled: false
logger:
  level: WARN
input:
  http_server:
    address: %q
    path: %q
    allowed_verbs: [ POST ]
output:
  nats_jetstream:
    urls: [ %q ]
    subject: %q
`

// startAgent runs the agent binary bin with its configuration in dir and
// returns once its HTTP server accepts connections (at most 30 s).
func startAgent(bin, dir, natsURL, subject string) (*agent, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	conf := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, agentConfig, addr, webhookPath, natsURL, subject), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		select {
		case <-exited:
			return nil, fmt.Errorf("%s exited before serving (its log: %s)", bin, logf.Name())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return &agent{addr: addr, pid: cmd.Process.Pid, stop: stop}, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("%s: no HTTP server on %s after 30s (its log: %s)", bin, addr, logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
