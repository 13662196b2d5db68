package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
	logPath := filepath.Join(dir, "agent.log")
	pid, exited, stop, err := startProcess(logPath, bin, "run", conf)
	if err != nil {
		return nil, err
	}
	err = awaitUp(exited, 30*time.Second, 100*time.Millisecond, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	switch {
	case errors.Is(err, errExited):
		return nil, fmt.Errorf("%s exited before serving (its log: %s)", bin, logPath)
	case err != nil:
		stop()
		return nil, fmt.Errorf("%s: no HTTP server on %s after 30s (its log: %s)", bin, addr, logPath)
	}
	return &agent{addr: addr, pid: pid, stop: stop}, nil
}

// startReceiverProcess runs the receiver's binary bin with env (and its
// listen address on a free loopback port) and returns that address once
// /readyz answers 200 (at most 30 s), its pid and how to stop it.
func startReceiverProcess(bin, dir string, env map[string]string) (string, int, func(), error) {
	port, err := freePort()
	if err != nil {
		return "", 0, nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(dir, "receiver.log")
	vars := []string{"RECEIVER_LISTEN=" + addr, "PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		if k != "RECEIVER_LISTEN" {
			vars = append(vars, k+"="+v)
		}
	}
	pid, exited, stop, err := startProcessEnv(logPath, vars, bin)
	if err != nil {
		return "", 0, nil, err
	}
	err = awaitUp(exited, 30*time.Second, 100*time.Millisecond, func() bool { return readyz("http://" + addr + "/readyz") })
	switch {
	case errors.Is(err, errExited):
		return "", 0, nil, fmt.Errorf("%s exited before ready (its log: %s)", bin, logPath)
	case err != nil:
		stop()
		return "", 0, nil, fmt.Errorf("%s: not ready on %s after 30s (its log: %s)", bin, addr, logPath)
	}
	return addr, pid, stop, nil
}
