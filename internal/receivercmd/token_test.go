package receivercmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/verify"
)

const (
	oldToken = "tok-old-0123456789abcdef"
	newToken = "tok-new-fedcba9876543210"
)

// TestSharedToken: with WEBHOOK_TOKENS set, an unsigned delivery carrying
// one of the tokens is stored; a wrong or missing token is answered 401; a
// signature that is present still decides alone. The start-up warning is
// logged, and no token ever reaches the logs or an answer.
func TestSharedToken(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "WEBHOOK_TOKENS": oldToken + " , " + newToken})
	client := js.client(t)

	var answers []string
	stored := uint64(0)
	for _, tc := range []struct {
		name    string
		headers func(body []byte) map[string]string
		status  int
	}{
		{"new token", func([]byte) map[string]string { return map[string]string{"Authorization": "Bearer " + newToken} }, 200},
		{"old token, bare", func([]byte) map[string]string { return map[string]string{"Authorization": oldToken} }, 200},
		{"wrong token", func([]byte) map[string]string {
			return map[string]string{"Authorization": "Bearer " + newToken[:len(newToken)-1] + "x"}
		}, 401},
		{"no token", func([]byte) map[string]string { return map[string]string{} }, 401},
		{"token in another header", func([]byte) map[string]string { return map[string]string{"X-Crawlhouse-Token": newToken} }, 401},
		{"right token, wrong signature", func(b []byte) map[string]string {
			return map[string]string{"Authorization": "Bearer " + newToken, verify.DefaultHeader: verify.Header("other-secret", b)}
		}, 401},
		{"signed, no token", func(b []byte) map[string]string {
			return map[string]string{verify.DefaultHeader: verify.Header(testSecret, b)}
		}, 200},
	} {
		body, id := page(t, "hello")
		a := r.postWith(t, body, tc.headers(body))
		answers = append(answers, a.body)
		if a.status != tc.status {
			t.Errorf("%s: got %d %s, want %d", tc.name, a.status, a.body, tc.status)
			continue
		}
		if tc.status == 200 {
			stored++
			if !strings.Contains(a.body, `"accepted"`) || !strings.Contains(a.body, id) {
				t.Errorf("%s: body %s", tc.name, a.body)
			}
		} else if !strings.Contains(a.body, `"invalid_signature"`) {
			t.Errorf("%s: body %s", tc.name, a.body)
		}
	}
	if got := streamMsgs(t, client); got != stored {
		t.Errorf("stream holds %d messages, want %d", got, stored)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	logs := r.logs.String()
	if !strings.Contains(logs, "WEBHOOK_TOKENS set: deliveries without a signature are accepted with a shared token") {
		t.Errorf("no start-up warning:\n%s", logs)
	}
	for _, tok := range []string{oldToken, newToken, newToken[:len(newToken)-1]} {
		if strings.Contains(logs, tok) || strings.Contains(strings.Join(answers, "\n"), tok) {
			t.Errorf("a token reached the logs or an answer")
		}
	}
}

// TestSharedTokenOff: by default a token is worth nothing: an unsigned
// delivery is refused whatever it carries.
func TestSharedTokenOff(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL()})
	body, _ := page(t, "hello")
	a := r.postWith(t, body, map[string]string{"Authorization": "Bearer " + newToken})
	if a.status != 401 || !strings.Contains(a.body, "signature missing") {
		t.Fatalf("got %d %s, want 401 signature missing", a.status, a.body)
	}
	if n := streamMsgs(t, js.client(t)); n != 0 {
		t.Fatalf("stream holds %d messages", n)
	}
	if strings.Contains(r.logs.String(), "WEBHOOK_TOKENS set") {
		t.Error("token warning logged while the option is off")
	}
}

// TestSharedTokenSources: with WEBHOOK_TOKEN_SOURCES the token counts only
// from the listed networks; a token-only receiver (no secret) works.
func TestSharedTokenSources(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	for _, tc := range []struct {
		sources string
		status  int
	}{{"10.0.0.0/8", 401}, {"10.0.0.0/8,127.0.0.0/8", 200}, {"127.0.0.1", 200}} {
		r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "WEBHOOK_SECRETS": "",
			"WEBHOOK_TOKENS": newToken, "WEBHOOK_TOKEN_HEADER": "X-Crawlhouse-Token", "WEBHOOK_TOKEN_SOURCES": tc.sources})
		body, _ := page(t, "hello")
		a := r.postWith(t, body, map[string]string{"X-Crawlhouse-Token": newToken})
		if a.status != tc.status {
			t.Errorf("sources %s: got %d %s, want %d", tc.sources, a.status, a.body, tc.status)
		}
		// Without a secret, a signature cannot be checked: it is no way in.
		b, _ := page(t, "hello")
		if a := r.post(t, b, verify.DefaultHeader, verify.Header(testSecret, b)); a.status != 401 {
			t.Errorf("sources %s: signed delivery without token: got %d, want 401", tc.sources, a.status)
		}
	}
}

// TestSharedTokenConfig: settings that would weaken the option stop the
// start, naming the variable and never the token.
func TestSharedTokenConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"short", map[string]string{"WEBHOOK_TOKENS": "s3cr3t-tok"}, "WEBHOOK_TOKENS: every token must have at least 16 characters"},
		{"with unsigned", map[string]string{"WEBHOOK_TOKENS": newToken, "WEBHOOK_ALLOW_UNSIGNED": "true"}, "WEBHOOK_TOKENS: pointless with WEBHOOK_ALLOW_UNSIGNED"},
		{"sources alone", map[string]string{"WEBHOOK_SECRETS": "s3cr3t", "WEBHOOK_TOKEN_SOURCES": "10.0.0.0/8"}, "WEBHOOK_TOKEN_SOURCES: set without WEBHOOK_TOKENS"},
		{"bad source", map[string]string{"WEBHOOK_TOKENS": newToken, "WEBHOOK_TOKEN_SOURCES": "s3cr3t-net"}, "WEBHOOK_TOKEN_SOURCES: entry 1"},
		{"header is the signature's", map[string]string{"WEBHOOK_TOKENS": newToken, "WEBHOOK_TOKEN_HEADER": "X-Firecrawl-Signature"}, "WEBHOOK_TOKEN_HEADER: must differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := Run(ctx, []string{"receiver"}, func(k string) string { return tc.env[k] }, &out, &out)
			if err == nil {
				t.Fatal("Run started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error()+out.String(), "s3cr3t") || strings.Contains(err.Error()+out.String(), newToken) {
				t.Errorf("a token in the error or output: %v", err)
			}
		})
	}
}
