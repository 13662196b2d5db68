package sink

import (
	"errors"
	"fmt"
)

// The bounds of a batch and of the inserts in flight. They are checked in
// one place, Config.Validate: the sink's configuration reports them by
// their variables at start, and NewConsumer refuses a Config outside them.
const (
	maxBatchSize       = 100000
	minBatchBytes      = 1 << 20 // above any one message (NATS' max_payload, 1 MB by default)
	maxBatchBytes      = 1 << 30
	maxInsertsInFlight = 16
)

// Validate reports every setting of c that could not work, each naming its
// variable (SINK_BATCH_SIZE, SINK_BATCH_BYTES, SINK_BATCH_WAIT,
// SINK_INSERTS_IN_FLIGHT, SINK_MAX_DELIVER).
func (c Config) Validate() error {
	var errs []error
	if c.BatchSize < 1 || c.BatchSize > maxBatchSize {
		errs = append(errs, fmt.Errorf("SINK_BATCH_SIZE: %d is not between 1 and %d", c.BatchSize, maxBatchSize))
	}
	if c.BatchBytes < minBatchBytes || c.BatchBytes > maxBatchBytes {
		errs = append(errs, fmt.Errorf("SINK_BATCH_BYTES: %d is not between 1 MiB (%d) and 1 GiB (%d)", c.BatchBytes, minBatchBytes, maxBatchBytes))
	}
	if c.BatchWait <= 0 {
		errs = append(errs, errors.New("SINK_BATCH_WAIT: must be positive"))
	}
	if c.InsertsInFlight < 1 || c.InsertsInFlight > maxInsertsInFlight {
		errs = append(errs, fmt.Errorf("SINK_INSERTS_IN_FLIGHT: %d is not between 1 and %d", c.InsertsInFlight, maxInsertsInFlight))
	}
	if c.MaxDeliver < 1 {
		errs = append(errs, fmt.Errorf("SINK_MAX_DELIVER: %d must be at least 1", c.MaxDeliver))
	}
	return errors.Join(errs...)
}
