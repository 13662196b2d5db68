package logs

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
		secrets        []string
	}{
		{"nats with password", "nats://app:s3cret@nats-1:4222", "nats://app:REDACTED@nats-1:4222", []string{"s3cret"}},
		{"nats token", "nats://tok3n@nats-1:4222", "nats://REDACTED@nats-1:4222", []string{"tok3n"}},
		{"nats list", "nats://a:pw1@n1:4222, nats://a:pw2@n2:4222", "nats://a:REDACTED@n1:4222,nats://a:REDACTED@n2:4222", []string{"pw1", "pw2"}},
		{"slack path token", "https://hooks.slack.com/services/T000/B000/XXXXsecret", "https://hooks.slack.com/services/REDACTED/REDACTED/REDACTED", []string{"XXXXsecret", "T000"}},
		{"query token", "https://alerts.example.com/hook?token=abc123&channel=ops", "https://alerts.example.com/hook?channel=REDACTED&token=REDACTED", []string{"abc123", "ops"}},
		{"plain", "http://127.0.0.1:4222", "http://127.0.0.1:4222", nil},
		{"one segment", "https://api.example.com/v2", "https://api.example.com/v2", nil},
		{"fragment", "https://x.example/a#secret", "https://x.example/a", []string{"secret"}},
		{"bare host port", "127.0.0.1:4222", "127.0.0.1:4222", nil},
		{"not a url", "user:pass@host", "REDACTED", []string{"pass"}},
		{"empty", "", "", nil},
		{"escaped slash in first segment", "https://x.example/hook%2Fs3cretpart/x", "https://x.example/hook/REDACTED/REDACTED", []string{"s3cretpart"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := RedactURL(tc.in)
			if got != tc.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
			}
			for _, s := range tc.secrets {
				if strings.Contains(got, s) {
					t.Errorf("RedactURL(%q) = %q still holds %q", tc.in, got, s)
				}
			}
		})
	}
}
