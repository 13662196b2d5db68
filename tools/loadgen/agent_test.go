package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"

	"github.com/nats-io/nats.go/jetstream"
)

// A phase that answers after the PubAck counts only if the stream holds
// what it answered: storedAll accepts as many messages as answers (or
// more) and names the phase and both counts when the stream holds fewer.
func TestStoredAll(t *testing.T) {
	url := streamtest.Start(t)
	_, js := streamtest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CRAWL_EVENTS", Subjects: []string{"crawl.events.>"}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, "crawl.events.crawl.page", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := storedAll(ctx, js, "agent", 3); err != nil {
		t.Fatalf("3 answered, 3 stored: %v", err)
	}
	err := storedAll(ctx, js, "agent", 4)
	if err == nil || !strings.Contains(err.Error(), "agent: answered 4 deliveries but the stream holds 3") {
		t.Fatalf("4 answered, 3 stored: err %v, want one naming the phase and both counts", err)
	}
}

// The agent is started with a configuration of its HTTP server at the
// webhook path on a loopback port and of the stream's subject on the given
// server; an agent that exits before serving is an error that points at
// its log.
func TestStartAgentExits(t *testing.T) {
	bin, err := exec.LookPath("false")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err = startAgent(bin, dir, "nats://127.0.0.1:4222", "crawl.events.crawl.page")
	if err == nil || !strings.Contains(err.Error(), "exited before serving") || !strings.Contains(err.Error(), filepath.Join(dir, "agent.log")) {
		t.Fatalf("err %v, want an exit before serving that names the log", err)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`address: "127.0.0.1:`, `path: "` + webhookPath + `"`, `urls: [ "nats://127.0.0.1:4222" ]`, `subject: "crawl.events.crawl.page"`} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("agent.yaml lacks %s:\n%s", want, conf)
		}
	}
}

// A receiver binary that exits before it is ready is an error that points
// at its log.
func TestStartReceiverProcessExits(t *testing.T) {
	bin, err := exec.LookPath("false")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, _, _, err = startReceiverProcess(bin, dir, map[string]string{"RECEIVER_LISTEN": "127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "exited before ready") || !strings.Contains(err.Error(), filepath.Join(dir, "receiver.log")) {
		t.Fatalf("err %v, want an exit before ready that names the log", err)
	}
}
