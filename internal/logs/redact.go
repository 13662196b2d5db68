package logs

import (
	"net/url"
	"strings"
)

// Redacted replaces every credential RedactURL removes.
const Redacted = "REDACTED"

// RedactURL returns raw fit for a log line or an error: the password of its
// userinfo, every query value and every path segment after the first are
// replaced by REDACTED, because any of them can hold a credential (NATS and
// ClickHouse URLs carry user:password@, alert webhooks carry their token in
// the path, e.g. Slack's /services/T…/B…/secret, or in ?token=). What stays
// (scheme, host, port, first path segment, query keys) is enough to tell
// which endpoint was meant. A list of URLs separated by commas (NATS_URL) is
// redacted element by element. Text that does not parse as a URL with a
// host is replaced whole: it may be a credential itself.
func RedactURL(raw string) string {
	if strings.Contains(raw, ",") {
		parts := strings.Split(raw, ",")
		for i, p := range parts {
			parts[i] = RedactURL(strings.TrimSpace(p))
		}
		return strings.Join(parts, ",")
	}
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		// A bare host:port (NATS accepts one) has no secret in it; anything
		// else that is not a URL with a host might be one.
		if h, ok := hostPort(raw); ok {
			return h
		}
		return Redacted
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Redacted)
		} else {
			// nats://token@host: a lone userinfo is a token.
			u.User = url.User(Redacted)
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{Redacted}
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	if segs := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/"); len(segs) > 1 {
		for i := 1; i < len(segs); i++ {
			if segs[i] != "" {
				segs[i] = Redacted
			}
		}
		u.RawPath = ""
		u.Path = "/" + strings.Join(segs, "/")
	}
	// url.URL.String would escape the placeholder's surroundings; rebuild
	// it as is.
	s := u.String()
	return strings.ReplaceAll(s, url.QueryEscape(Redacted), Redacted)
}

// hostPort reports whether s is a plain host:port (or host) with nothing
// that could be a credential.
func hostPort(s string) (string, bool) {
	if s == "" || strings.ContainsAny(s, "@/?#\\ ") {
		return "", false
	}
	return s, true
}
