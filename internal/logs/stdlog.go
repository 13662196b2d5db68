package logs

import (
	stdlog "log"
	"strings"

	"github.com/rs/zerolog"
)

// HTTPServerLog is the ErrorLog of a binary's http.Server: net/http's own
// complaints (TLS handshakes, accept errors) go to the structured log as
// warnings, not to stderr.
func HTTPServerLog(log zerolog.Logger) *stdlog.Logger {
	return stdlog.New(warnWriter{log}, "", 0)
}

type warnWriter struct{ log zerolog.Logger }

func (w warnWriter) Write(p []byte) (int, error) {
	w.log.Warn().Str("source", "net/http").Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}
