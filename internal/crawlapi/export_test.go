package crawlapi

// Test helpers of this package for its external tests (package
// crawlapi_test), which may import the simulator: it imports crawlapi.
const TestKey = testKey

var (
	NewTestClient = newTestClient
	RecordWaits   = recordWaits
)
