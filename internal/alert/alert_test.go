package alert_test

import (
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/alert"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  alert.Config
		ok   bool
	}{
		{"defaults", alert.Config{Threshold: 5, Window: 10 * time.Minute}, true},
		{"webhook", alert.Config{WebhookURL: "https://hooks.slack.com/services/x", Threshold: 5, Window: time.Minute}, true},
		{"zero threshold", alert.Config{Threshold: 0, Window: time.Minute}, false},
		{"no window", alert.Config{Threshold: 1}, false},
		{"bad url", alert.Config{WebhookURL: "ftp://x", Threshold: 1, Window: time.Minute}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
