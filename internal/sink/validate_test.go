package sink_test

import (
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/sink"
)

// TestConfigBounds: a batch setting out of its bounds is refused by its
// variable, alike by the configuration's check and by NewConsumer.
func TestConfigBounds(t *testing.T) {
	t.Parallel()
	defaults := sink.Config{BatchSize: 10000, BatchBytes: sink.DefaultBatchBytes, BatchWait: time.Second, InsertsInFlight: 4, MaxDeliver: 10}
	if err := defaults.Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*sink.Config)
		want string
	}{
		{"no batch", func(c *sink.Config) { c.BatchSize = 0 }, "SINK_BATCH_SIZE"},
		{"batch too large", func(c *sink.Config) { c.BatchSize = 100001 }, "SINK_BATCH_SIZE"},
		{"batch bytes below a message", func(c *sink.Config) { c.BatchBytes = 1<<20 - 1 }, "SINK_BATCH_BYTES"},
		{"batch bytes over 1 GiB", func(c *sink.Config) { c.BatchBytes = 1<<30 + 1 }, "SINK_BATCH_BYTES"},
		{"no wait", func(c *sink.Config) { c.BatchWait = 0 }, "SINK_BATCH_WAIT"},
		{"no insert in flight", func(c *sink.Config) { c.InsertsInFlight = 0 }, "SINK_INSERTS_IN_FLIGHT"},
		{"too many in flight", func(c *sink.Config) { c.InsertsInFlight = 17 }, "SINK_INSERTS_IN_FLIGHT"},
		{"no delivery", func(c *sink.Config) { c.MaxDeliver = 0 }, "SINK_MAX_DELIVER"},
	} {
		c := defaults
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate: %v, want %s named", tc.name, err, tc.want)
		}
		if _, err := sink.NewConsumer(c, sink.Deps{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewConsumer: %v, want %s named", tc.name, err, tc.want)
		}
	}
}
