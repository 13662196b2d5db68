package logs

import (
	"os"
	"testing"
)

// TestForHumans: a command's logs stay as configured when they do not go
// to a terminal (a pipe, a file), and LOG_FORMAT always wins.
func TestForHumans(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	unset := func(string) string { return "" }
	if got := ForHumans(Config{Format: "json"}, unset, w).Format; got != "json" {
		t.Errorf("to a pipe: %s, want json", got)
	}
	set := func(k string) string { return map[string]string{"LOG_FORMAT": "json"}[k] }
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if got := ForHumans(Config{Format: "json"}, unset, tty).Format; got != "console" {
			t.Errorf("to a terminal: %s, want console", got)
		}
		if got := ForHumans(Config{Format: "json"}, set, tty).Format; got != "json" {
			t.Errorf("to a terminal with LOG_FORMAT=json: %s, want json", got)
		}
	}
}
