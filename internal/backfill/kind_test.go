package backfill

import "testing"

// An operator's kind is one of the two, or nothing.
func TestParseKind(t *testing.T) {
	t.Parallel()
	if _, err := ParseKind("extract"); err == nil {
		t.Error("ParseKind accepted extract")
	}
}
