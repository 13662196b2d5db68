package crawlapi

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/crawlhouse/crawlhouse/internal/logs"
)

// Ref resolves next, the next link of the page read at current (a
// reference), and returns the reference to follow. next is resolved as a
// browser would (RFC 3986) against the URL of the page that carried it, so
// that a relative link ("v2/crawl/…", "@host/…", "//host/…") means what it
// says, and the result must name CRAWL_API_URL's host (compared without
// regard to case) and its effective port, or no port; its scheme is ignored,
// because self-hosted APIs are known to put a wrong one there, and the
// request goes on the base's scheme anyway. Anything else (another host or
// port, userinfo, an opaque URL, a path beginning with //) is refused with
// ErrForeignNext and a log line naming the link, redacted.
func (c *Client) Ref(current, next string) (string, error) {
	from, err := c.target(current)
	if err != nil {
		from = c.base
	}
	n, err := url.Parse(strings.TrimSpace(next))
	if err != nil {
		return "", c.refuse(next, "not a URL")
	}
	u := from.ResolveReference(n)
	switch {
	case u.Opaque != "":
		return "", c.refuse(next, "opaque URL")
	case u.User != nil:
		return "", c.refuse(u.String(), "userinfo in the link")
	case !strings.EqualFold(u.Hostname(), c.base.Hostname()):
		return "", c.refuse(u.String(), "another host")
	case u.Port() != "" && u.Port() != effectivePort(c.base):
		return "", c.refuse(u.String(), "another port")
	case strings.HasPrefix(u.EscapedPath(), "//"):
		// A reference beginning with // would read as a host when the
		// cursor is parsed again; the API never sends one.
		return "", c.refuse(u.String(), "path begins with //")
	}
	return requestURI(u), nil
}

func (c *Client) refuse(next, why string) error {
	redacted := logs.RedactURL(next)
	c.log.Warn().Str("next", redacted).Str("reason", why).Str("api", logs.RedactURL(c.base.String())).
		Msg("crawl API sent a next link off CRAWL_API_URL's host; not followed, the key is not sent")
	return fmt.Errorf("%w: %s (%s)", ErrForeignNext, redacted, why)
}

// requestURI is the path and query of u, the form of a reference.
func requestURI(u *url.URL) string {
	r := url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}
	if r.Path == "" {
		r.Path = "/"
	}
	return r.String()
}

func defaultPort(scheme string) string {
	if strings.EqualFold(scheme, "https") {
		return "443"
	}
	return "80"
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return defaultPort(u.Scheme)
}

// target is the URL of a reference: the base's scheme and host, the
// reference's path and query. A reference that does not already carry the
// base's path prefix (JobRef) gets it. A reference with a scheme, a host
// or userinfo, or a relative path, is refused: a saved cursor is input too.
func (c *Client) target(ref string) (*url.URL, error) {
	r, err := url.Parse(ref)
	if err != nil {
		// url.Error would repeat the reference unredacted.
		return nil, fmt.Errorf("reference %s does not parse", logs.RedactURL(ref))
	}
	if r.Scheme != "" || r.Host != "" || r.User != nil || r.Opaque != "" || !strings.HasPrefix(r.Path, "/") {
		return nil, fmt.Errorf("reference %s is not a path on CRAWL_API_URL's host", logs.RedactURL(ref))
	}
	t := &url.URL{Scheme: c.base.Scheme, Host: c.base.Host, Path: r.Path, RawPath: r.RawPath, RawQuery: r.RawQuery}
	if c.base.Path != "" && t.Path != c.base.Path && !strings.HasPrefix(t.Path, c.base.Path+"/") {
		t.Path = c.base.Path + r.Path
		t.RawPath = ""
		if r.RawPath != "" {
			t.RawPath = c.base.EscapedPath() + r.RawPath
		}
	}
	return t, nil
}
