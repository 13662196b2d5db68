package logs

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"strings"
)

// SecretVars are the variables of any binary that hold a credential or
// a URL that may carry one. Scrub removes their values from what a binary
// writes and returns; RedactURL is still applied where a URL is logged, so
// that what stays says which endpoint was meant.
var SecretVars = []string{
	"WEBHOOK_SECRETS", "WEBHOOK_TOKENS", "NATS_URL", "NATS_TOKEN", "NATS_PASSWORD",
	"CLICKHOUSE_ADDR", "CLICKHOUSE_PASSWORD", "CRAWL_API_URL", "CRAWL_API_KEY", "ALERT_WEBHOOK_URL",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
	"READER_TOKENS", "READER_CURSOR_KEY", "CLICKHOUSE_HTTP_URL",
}

// urlVars may hold URLs (or host:port lists) whose credential is a part of
// the value: userinfo, query values, path segments. The others are
// secrets whole (WEBHOOK_SECRETS one per comma-separated entry).
var urlVars = map[string]bool{
	"NATS_URL": true, "CLICKHOUSE_ADDR": true, "CLICKHOUSE_HTTP_URL": true, "CRAWL_API_URL": true, "ALERT_WEBHOOK_URL": true,
	"OTEL_EXPORTER_OTLP_ENDPOINT": true, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": true,
}

// headerVars hold comma-separated key=value headers (a tracing backend's
// API key, as OTEL_EXPORTER_OTLP_HEADERS=x-honeycomb-team=…): the values
// are secrets, the keys say which header it was.
var headerVars = map[string]bool{"OTEL_EXPORTER_OTLP_HEADERS": true, "OTEL_EXPORTER_OTLP_TRACES_HEADERS": true}

// minSecret is the shortest value scrubbed: replacing two or three common
// letters everywhere would garble every line and hide nothing.
const minSecret = 4

// Secrets returns the credentials among the SecretVars that getenv holds:
// whole values, list entries, and the parts of URLs RedactURL hides.
func Secrets(getenv func(string) string) []string {
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) >= minSecret {
			out = append(out, s)
		}
	}
	for _, name := range SecretVars {
		v := getenv(name)
		if v == "" {
			continue
		}
		if headerVars[name] {
			for _, p := range strings.Split(v, ",") {
				if _, val, ok := strings.Cut(p, "="); ok {
					add(val)
					// The SDK takes the value URL-encoded.
					if dec, err := url.QueryUnescape(strings.TrimSpace(val)); err == nil {
						add(dec)
					}
				}
			}
			continue
		}
		if !urlVars[name] {
			for _, p := range strings.Split(v, ",") {
				add(p)
			}
			if name != "WEBHOOK_SECRETS" {
				add(v)
			}
			continue
		}
		for _, p := range strings.Split(v, ",") {
			for _, s := range urlSecrets(strings.TrimSpace(p)) {
				add(s)
			}
		}
	}
	return out
}

// urlSecrets are the parts of raw that RedactURL would hide. A value that
// does not parse still gives up what precedes its last '@' (a userinfo).
func urlSecrets(raw string) []string {
	var out []string
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		user := raw[:i]
		if j := strings.Index(user, "://"); j >= 0 {
			user = user[j+3:]
		}
		out = append(out, user)
		if _, pw, ok := strings.Cut(user, ":"); ok {
			out = append(out, pw)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return out
	}
	hideSecrets(u, func(secret string) string {
		out = append(out, secret)
		return secret
	})
	return out
}

// Scrubber replaces secrets, as written or as JSON or a URL would escape
// them, by REDACTED. It is the last line of defence behind RedactURL: a
// value that reaches a log line or an error through a path nobody
// redacted (a library's error repeating its input) is still hidden.
type Scrubber struct {
	forms [][]byte
}

// NewScrubber scrubs the given secrets (see Secrets).
func NewScrubber(secrets []string) *Scrubber {
	s := &Scrubber{}
	seen := map[string]bool{}
	for _, sec := range secrets {
		if len(sec) < minSecret {
			continue
		}
		j, _ := json.Marshal(sec)
		for _, f := range []string{sec, string(j[1 : len(j)-1]), url.QueryEscape(sec), url.PathEscape(sec)} {
			if !seen[f] {
				seen[f] = true
				s.forms = append(s.forms, []byte(f))
			}
		}
	}
	// Longest first, so that a secret containing another is replaced whole.
	for i := 1; i < len(s.forms); i++ {
		for j := i; j > 0 && len(s.forms[j]) > len(s.forms[j-1]); j-- {
			s.forms[j], s.forms[j-1] = s.forms[j-1], s.forms[j]
		}
	}
	return s
}

// Bytes returns p with every secret replaced; p itself when it holds none.
func (s *Scrubber) Bytes(p []byte) []byte {
	for _, f := range s.forms {
		if bytes.Contains(p, f) {
			p = bytes.ReplaceAll(p, f, []byte(Redacted))
		}
	}
	return p
}

// String is Bytes for a string.
func (s *Scrubber) String(v string) string { return string(s.Bytes([]byte(v))) }

// Writer scrubs everything written to w. Each Write is scrubbed on its
// own: zerolog writes one whole line at a time.
func (s *Scrubber) Writer(w io.Writer) *ScrubWriter {
	return &ScrubWriter{s: s, w: w}
}

// ScrubWriter is a writer that scrubs (see Scrubber.Writer).
type ScrubWriter struct {
	s *Scrubber
	w io.Writer
}

func (w *ScrubWriter) Write(p []byte) (int, error) {
	if _, err := w.w.Write(w.s.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Error returns err with its message scrubbed; errors.Is and errors.As
// still see what it wraps. nil stays nil.
func (s *Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := s.String(msg); clean != msg {
		return &scrubbedError{msg: clean, err: err}
	}
	return err
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
