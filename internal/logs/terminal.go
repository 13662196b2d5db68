package logs

import (
	"io"
	"os"
)

// ForHumans is c for a command a person runs by hand (`sink migrate`,
// `sink backfill`...) logging to w: the console format when w is a
// terminal and LOG_FORMAT is not set (getenv), c otherwise. LOG_FORMAT
// always wins.
func ForHumans(c Config, getenv func(string) string, w io.Writer) Config {
	if getenv("LOG_FORMAT") == "" && isTerminal(w) {
		c.Format = "console"
	}
	return c
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
