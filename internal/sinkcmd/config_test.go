package sinkcmd_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := sinkcmd.Load(env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != ":9090" || cfg.Consumer != "sink" || cfg.BatchSize != 10000 || cfg.BatchBytes != 16<<20 || cfg.MemoryLimit != 448<<20 || cfg.BatchWait != time.Second ||
		cfg.MaxDeliver != 10 || cfg.DLQStream != "CRAWL_DLQ" || cfg.Addr != "127.0.0.1:9000" || cfg.Database != "crawl" ||
		cfg.ArchiveConfig.User != "default" || cfg.TLS || cfg.BackfillQuietPeriod != 2*time.Minute || cfg.Threshold != 5 ||
		cfg.Window != 10*time.Minute || cfg.StreamConfig.Stream != "CRAWL_EVENTS" || cfg.URL != "nats://127.0.0.1:4222" {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, value, want string
	}{
		{"batch size", "SINK_BATCH_SIZE", "0", "SINK_BATCH_SIZE"},
		{"batch size over its bound", "SINK_BATCH_SIZE", "100001", "SINK_BATCH_SIZE"},
		{"inserts in flight", "SINK_INSERTS_IN_FLIGHT", "17", "SINK_INSERTS_IN_FLIGHT"},
		{"batch bytes below a message", "SINK_BATCH_BYTES", "65536", "SINK_BATCH_BYTES"},
		{"batch bytes over 1 GiB", "SINK_BATCH_BYTES", "2147483648", "SINK_BATCH_BYTES"},
		{"memory limit below the batches in hand", "SINK_MEMORY_LIMIT", "134217728", "SINK_MEMORY_LIMIT"},
		{"batch wait", "SINK_BATCH_WAIT", "-1s", "SINK_BATCH_WAIT"},
		{"max deliver", "SINK_MAX_DELIVER", "0", "SINK_MAX_DELIVER"},
		{"gc percent", "SINK_GC_PERCENT", "10", "SINK_GC_PERCENT"},
		{"wire compression", "CLICKHOUSE_COMPRESSION", "gzip", "CLICKHOUSE_COMPRESSION"},
		{"dlq is the events stream", "SINK_DLQ_STREAM", "CRAWL_EVENTS", "SINK_DLQ_STREAM"},
		{"consumer", "SINK_CONSUMER", "a.b", "SINK_CONSUMER"},
		{"database", "CLICKHOUSE_DATABASE", "crawl; DROP", "CLICKHOUSE_DATABASE"},
		{"cluster", "CLICKHOUSE_CLUSTER", "c'x", "CLICKHOUSE_CLUSTER"},
		{"crawl api", "CRAWL_API_URL", "not a url", "CRAWL_API_URL"},
		{"alert threshold", "ALERT_FAILURE_THRESHOLD", "0", "ALERT_FAILURE_THRESHOLD"},
		{"alert url", "ALERT_WEBHOOK_URL", "mailto:x", "ALERT_WEBHOOK_URL"},
		{"log format", "LOG_FORMAT", "xml", "LOG_FORMAT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := sinkcmd.Run(context.Background(), []string{"sink"}, env{tc.key: tc.value}.get, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s=%q: %v", tc.key, tc.value, err)
			}
		})
	}
}

// TestSecretsStayOut: a bad value of a secret is reported by name only.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	err := sinkcmd.Run(context.Background(), []string{"sink"}, env{"CLICKHOUSE_PASSWORD": "s3cret-pw", "CRAWL_API_KEY": "s3cret-key", "ALERT_WEBHOOK_URL": "ftp://s3cret-hook", "SINK_BATCH_SIZE": "x"}.get, io.Discard, io.Discard)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v", err)
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		out     string
		wantErr string
	}{
		{[]string{"sink", "--help"}, "SINK_BATCH_SIZE", ""},
		{[]string{"sink", "--help"}, "sink redrive", ""},
		{[]string{"sink", "migrate", "--help"}, "Usage: sink migrate", ""},
		{[]string{"sink", "backfill", "--help"}, "Usage: sink backfill <crawl-id>", ""},
		{[]string{"sink", "redrive", "--help"}, "Usage: sink redrive", ""},
		{[]string{"sink", "--version"}, "sink ", ""},
		{[]string{"sink", "frobnicate"}, "", "unknown command"},
		{[]string{"sink", "--frob"}, "", "unknown flag"},
		{[]string{"sink", "backfill"}, "", "usage: sink backfill <crawl-id>"},
		{[]string{"sink", "redrive", "extra"}, "", "unexpected argument"},
		{[]string{"sink", "backfill", "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c"}, "", "CRAWL_API_URL is not set"},
		{[]string{"sink", "backfill", "-kind", "batch_scrape", "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c"}, "", "CRAWL_API_URL is not set"},
		{[]string{"sink", "backfill", "--kind=crawl", "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c"}, "", "CRAWL_API_URL is not set"},
		{[]string{"sink", "backfill", "-kind", "extract", "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c"}, "", `job kind "extract" is neither crawl nor batch_scrape`},
		{[]string{"sink", "backfill", "-kind", "batch_scrape"}, "", "usage: sink backfill <crawl-id>"},
		{[]string{"sink", "backfill", "-frob", "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c"}, "", "flag provided but not defined: -frob"},
		{[]string{"sink", "backfill", "--help"}, "-kind crawl|batch_scrape", ""},
		{[]string{"sink", "--help"}, "sink diff <url>", ""},
		{[]string{"sink", "diff", "--help"}, "Usage: sink diff <url> [--from JOB] [--to JOB]", ""},
		{[]string{"sink", "diff"}, "", "usage: sink diff <url> [--from JOB] [--to JOB]"},
		{[]string{"sink", "diff", "https://a.example/", "--frob", "x"}, "", "flag provided but not defined: -frob"},
	} {
		var out strings.Builder
		err := sinkcmd.Run(context.Background(), tc.args, env{}.get, &out, io.Discard)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case !strings.Contains(out.String(), tc.out):
			t.Errorf("%v: output lacks %q:\n%s", tc.args, tc.out, out.String())
		}
	}
}
