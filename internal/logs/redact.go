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
	hideSecrets(u, func(string) string { return Redacted })
	u.Fragment, u.RawFragment = "", ""
	// url.URL.String would escape the placeholder's surroundings; rebuild
	// it as is.
	s := u.String()
	return strings.ReplaceAll(s, url.QueryEscape(Redacted), Redacted)
}

// hideSecrets replaces, in u, each part that can hold a credential by what
// hide returns for it: the password of the userinfo (or a lone userinfo,
// nats://token@host), every query value, and every path segment after the
// first. It is the one statement of that rule, for RedactURL and for the
// scrubber's list of secrets (urlSecrets).
func hideSecrets(u *url.URL, hide func(secret string) string) {
	if u.User != nil {
		if pw, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), hide(pw))
		} else {
			u.User = url.User(hide(u.User.Username()))
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			for i, v := range vs {
				vs[i] = hide(v)
			}
			q[k] = vs
		}
		u.RawQuery = q.Encode()
	}
	if segs := strings.Split(strings.TrimPrefix(u.Path, "/"), "/"); len(segs) > 1 {
		changed := false
		for i := 1; i < len(segs); i++ {
			if segs[i] != "" {
				segs[i] = hide(segs[i])
				changed = true
			}
		}
		if changed {
			u.RawPath = ""
			u.Path = "/" + strings.Join(segs, "/")
		}
	}
}

// hostPort reports whether s is a plain host:port (or host) with nothing
// that could be a credential.
func hostPort(s string) (string, bool) {
	if s == "" || strings.ContainsAny(s, "@/?#\\ ") {
		return "", false
	}
	return s, true
}
