package takedown

import (
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/net/idna"
)

// OriginPattern is an RE2 expression whose first group is a URL's origin as
// it is written: the scheme, "://" and the authority (userinfo, host and
// port), up to the first '/', '?', '#' or '\' (which browsers read as '/').
// The write path (here) and the purge (ClickHouse's extract() in
// internal/archive) both cut URLs with it, so that both read the same host
// from every URL, however it is spelled. ClickHouse's domain() cannot serve:
// it answers "" for a host with a final dot.
const OriginPattern = `^([A-Za-z][A-Za-z0-9+.\-]*://[^/?#\\]*)`

var originRE = regexp.MustCompile(OriginPattern)

// hostProfile maps a host as browsers look it up (UTS 46: case folded,
// full-width forms and ideographic dots mapped, Unicode labels to
// punycode) without refusing the names DNS allows and STD3 does not
// (underscores, leading hyphens): a takedown must cover them too.
var hostProfile = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(false), idna.ValidateLabels(false))

// NormalizeHost is the one spelling takedowns compare hosts in: percent
// escapes decoded, lower case, IDNA ASCII (punycode) form, without the
// final dot of a fully qualified name. "Example.COM.", "example.com" and
// "EXAMPLE.com" are one host, so are "bücher.example", "BÜCHER.example" and
// "xn--bcher-kva.example". An IPv6 literal keeps its brackets, in lower
// case. A host IDNA cannot map (an invalid punycode label) is only lower
// cased. The bound is the host's length: the work is linear in it.
func NormalizeHost(h string) string {
	if strings.HasPrefix(h, "[") {
		return strings.ToLower(h)
	}
	if strings.Contains(h, "%") {
		if d, err := url.PathUnescape(h); err == nil {
			h = d
		}
	}
	a, err := hostProfile.ToASCII(strings.TrimSuffix(h, "."))
	if err != nil {
		a = strings.ToLower(h)
	}
	return strings.TrimSuffix(a, ".")
}

// UnicodeHost is a normalised host's Unicode form ("bücher.example" for
// "xn--bcher-kva.example"), to show beside it; h itself when it has none.
func UnicodeHost(h string) string {
	u, err := hostProfile.ToUnicode(h)
	if err != nil {
		return h
	}
	return u
}

// Origin is the scheme, host and port of a URL as takedowns compare them:
// the scheme in lower case, the host normalised (NormalizeHost), the port
// "" when it is the scheme's default (http 80, https 443) or not written,
// else its number without leading zeros. Userinfo is not part of it.
type Origin struct {
	Scheme, Host, Port string
}

// String is the origin as a URL starts.
func (o Origin) String() string {
	s := o.Scheme + "://" + o.Host
	if o.Port != "" {
		s += ":" + o.Port
	}
	return s
}

var defaultPorts = map[string]string{"http": "80", "https": "443"}

// ParseOrigin reads an origin as OriginPattern cuts it from a URL (raw is
// the whole first group, "" when the URL has none). ok is false when raw
// has no host.
func ParseOrigin(raw string) (o Origin, ok bool) {
	scheme, authority, found := strings.Cut(raw, "://")
	if !found {
		return Origin{}, false
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	host, port := authority, ""
	if strings.HasPrefix(authority, "[") {
		if i := strings.IndexByte(authority, ']'); i >= 0 {
			host, port = authority[:i+1], strings.TrimPrefix(authority[i+1:], ":")
		}
	} else if i := strings.IndexByte(authority, ':'); i >= 0 {
		host, port = authority[:i], authority[i+1:]
	}
	o = Origin{Scheme: strings.ToLower(scheme), Host: NormalizeHost(host), Port: normalizePort(port)}
	if defaultPorts[o.Scheme] == o.Port {
		o.Port = ""
	}
	return o, o.Host != ""
}

// normalizePort drops a number's leading zeros; anything else is kept as
// written (it is no port a browser would use, and matches only itself).
func normalizePort(p string) string {
	if p == "" || strings.Trim(p, "0123456789") != "" {
		return p
	}
	if p = strings.TrimLeft(p, "0"); p == "" {
		return "0"
	}
	return p
}

// Location is a URL as takedowns compare it: its origin and the rest as
// written (path, query and fragment), with the empty path read as "/" (as
// "https://a.test" and "https://a.test/" are one page).
type Location struct {
	Origin Origin
	Rest   string
}

// SplitURL cuts u with OriginPattern into the origin as written and the
// rest; origin is "" when u has none.
func SplitURL(u string) (origin, rest string) {
	m := originRE.FindStringSubmatch(u)
	if m == nil {
		return "", u
	}
	return m[1], u[len(m[1]):]
}

// ParseLocation reads u; ok is false when u has no origin with a host.
func ParseLocation(u string) (Location, bool) {
	raw, rest := SplitURL(u)
	o, ok := ParseOrigin(raw)
	if !ok {
		return Location{}, false
	}
	return Location{Origin: o, Rest: NormalizeRest(rest)}, true
}

// NormalizeRest reads an empty path as "/": "", "?q" and "#f" become "/",
// "/?q" and "/#f".
func NormalizeRest(rest string) string {
	if rest == "" || rest[0] == '?' || rest[0] == '#' {
		return "/" + rest
	}
	return rest
}

// String is the location as a URL.
func (l Location) String() string { return l.Origin.String() + l.Rest }

// HasPrefix reports whether l lies under the prefix p: the same origin
// (never another host or port: "https://example.com" is no prefix of
// "https://example.community") and a path that is p's or continues it at a
// boundary: p ends with '/', '?' or '#', or l's next byte is one of them
// ("/private" covers "/private", "/private/x" and "/private?x", not
// "/privateer").
func (l Location) HasPrefix(p Location) bool {
	if l.Origin != p.Origin || !strings.HasPrefix(l.Rest, p.Rest) {
		return false
	}
	return len(l.Rest) == len(p.Rest) || EndsAtBoundary(p.Rest) || strings.IndexByte("/?#", l.Rest[len(p.Rest)]) >= 0
}

// EndsAtBoundary reports whether a prefix's rest ends at a URL boundary
// ('/', '?' or '#'), so that whatever follows it lies under it.
func EndsAtBoundary(rest string) bool {
	return rest != "" && strings.IndexByte("/?#", rest[len(rest)-1]) >= 0
}
