package receivercmd

import (
	"bytes"
	"context"
	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"strings"
	"testing"
	"time"
)

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	c, err := Load(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Config: receiver.Config{Path: "/webhooks/crawl", SignatureHeader: "X-Service-Signature",
			MaxBodyBytes: 33554432, PublishTimeout: 5 * time.Second, MaxInflight: 1024},
		Listen: ":8080", StoreDir: "./var/nats", SyncAlways: true,
	}
	got := c
	got.LogConfig, got.StreamConfig = LogConfig{}, receiver.StreamConfig{}
	if got.Listen != want.Listen || got.Path != want.Path || got.SignatureHeader != want.SignatureHeader ||
		got.MaxBodyBytes != want.MaxBodyBytes || got.PublishTimeout != want.PublishTimeout ||
		got.MaxInflight != want.MaxInflight || got.StoreDir != want.StoreDir || !got.SyncAlways ||
		got.AllowUnsigned || got.Embedded || got.GroupCommit != "auto" || len(got.Secrets) != 0 {
		t.Errorf("defaults: %+v", got)
	}
	if c.URL != "nats://127.0.0.1:4222" || c.Stream != "CRAWL_EVENTS" || c.SubjectPrefix != "crawl.events" ||
		c.DedupWindow != 30*time.Minute || c.MaxAge != 168*time.Hour || c.Replicas != 1 || c.Format != "json" {
		t.Errorf("stream/log defaults: %+v %+v", c.StreamConfig, c.LogConfig)
	}
}

// TestConfigErrors: a bad configuration stops Run before anything starts,
// with one line naming the variable and never showing a secret.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no secret", map[string]string{}, "WEBHOOK_SECRETS: required unless WEBHOOK_ALLOW_UNSIGNED=true"},
		{"blank secrets", map[string]string{"WEBHOOK_SECRETS": " , "}, "WEBHOOK_SECRETS: required"},
		{"bad duration", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "RECEIVER_PUBLISH_TIMEOUT": "soon"}, "RECEIVER_PUBLISH_TIMEOUT: not a duration"},
		{"timeout beyond sender", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "RECEIVER_PUBLISH_TIMEOUT": "12s"}, "RECEIVER_PUBLISH_TIMEOUT: 12s must be above 0 and below the sender's 10s"},
		{"bad bool", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "NATS_SYNC_ALWAYS": "s3cr3t-maybe"}, "NATS_SYNC_ALWAYS: not true or false"},
		{"bad int", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "RECEIVER_MAX_INFLIGHT": "many"}, "RECEIVER_MAX_INFLIGHT: not an integer"},
		{"zero inflight", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "RECEIVER_MAX_INFLIGHT": "0"}, "RECEIVER_MAX_INFLIGHT: must be positive"},
		{"bad listen", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "RECEIVER_LISTEN": "8080"}, "RECEIVER_LISTEN"},
		{"bad path", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "WEBHOOK_PATH": "hooks"}, "WEBHOOK_PATH"},
		{"bad stream", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "NATS_STREAM": "a.b"}, "NATS_STREAM"},
		{"token and user", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "NATS_TOKEN": "s3cr3t-token", "NATS_USER": "u", "NATS_PASSWORD": "s3cr3t-pw"}, "NATS_TOKEN and NATS_USER"},
		{"two errors", map[string]string{"RECEIVER_MAX_INFLIGHT": "0"}, "; RECEIVER_MAX_INFLIGHT"},
		{"log format", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "LOG_FORMAT": "xml"}, "LOG_FORMAT"},
		{"group commit", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "RECEIVER_GROUP_COMMIT": "sometimes"}, `RECEIVER_GROUP_COMMIT: "sometimes" is not true, false or auto`},
		{"inflight bytes below two bodies", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "WEBHOOK_MAX_BODY_BYTES": "1000", "RECEIVER_MAX_INFLIGHT_BYTES": "1500"}, "RECEIVER_MAX_INFLIGHT_BYTES: 1500 must be at least twice WEBHOOK_MAX_BODY_BYTES (1000)"},
		{"zero inflight bytes", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "RECEIVER_MAX_INFLIGHT_BYTES": "0"}, "RECEIVER_MAX_INFLIGHT_BYTES"},
		{"bad inflight bytes", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "RECEIVER_MAX_INFLIGHT_BYTES": "lots"}, "RECEIVER_MAX_INFLIGHT_BYTES: not an integer"},
		{"bad proxy", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "RECEIVER_TRUSTED_PROXIES": "10.0.0.0/8, s3cr3t-proxy"}, "RECEIVER_TRUSTED_PROXIES: entry 2 is neither a CIDR"},
		{"bad proxy mask", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "RECEIVER_TRUSTED_PROXIES": "10.0.0.0/33"}, "RECEIVER_TRUSTED_PROXIES: entry 1 is not a CIDR"},
		{"bad trace sender", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "RECEIVER_TRACE_TRUSTED_SENDERS": "10.0.0.0/8,,s3cr3t-sender"}, "RECEIVER_TRACE_TRUSTED_SENDERS: entry 3 is neither a CIDR"},
		{"trace senders unsigned", map[string]string{"WEBHOOK_ALLOW_UNSIGNED": "true", "RECEIVER_TRACE_TRUSTED_SENDERS": "10.0.0.0/8"}, "RECEIVER_TRACE_TRUSTED_SENDERS: a trace context is trusted only from a signed delivery"},
		{"unknown argument", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "ARG": "--port"}, `unknown argument "--port"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"receiver"}
			if a := tc.env["ARG"]; a != "" {
				args = append(args, a)
			}
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := Run(ctx, args, func(k string) string { return tc.env[k] }, &out, &out)
			if err == nil {
				t.Fatal("Run started")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q lacks %q", msg, tc.want)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			if strings.Contains(msg, "s3cr3t") || strings.Contains(out.String(), "s3cr3t") {
				t.Errorf("a secret shows: %q %q", msg, out.String())
			}
		})
	}
}

// TestGroupCommitSetting: auto is on exactly for an embedded server that
// syncs always; true and false are what they say, whatever the server.
func TestGroupCommitSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		setting            string
		embedded, syncAlws bool
		want               bool
	}{
		{"auto", true, true, true},
		{"", true, true, true},
		{"auto", true, false, false},
		{"auto", false, true, false},
		{"AUTO", false, false, false},
		{"true", false, false, true},
		{"1", true, false, true},
		{"false", true, true, false},
	} {
		c := Config{GroupCommit: tc.setting, Embedded: tc.embedded, SyncAlways: tc.syncAlws}
		got, err := c.GroupCommitOn()
		if err != nil || got != tc.want {
			t.Errorf("%q embedded=%v syncAlways=%v: %v, %v; want %v", tc.setting, tc.embedded, tc.syncAlws, got, err, tc.want)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"receiver", "--help"}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RECEIVER_LISTEN", ":8080", "WEBHOOK_MAX_BODY_BYTES", "33554432", "NATS_SYNC_ALWAYS", "NATS_DEDUP_WINDOW", "30m", "/readyz"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	out.Reset()
	if err := Run(context.Background(), []string{"receiver", "--version"}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "receiver dev") {
		t.Errorf("--version: %q", out.String())
	}
}
