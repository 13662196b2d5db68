package claim

import "time"

// SetClock makes c judge leases by now, for the tests of a lease that ran
// out.
func (c *KVClaims) SetClock(now func() time.Time) { c.now = now }
