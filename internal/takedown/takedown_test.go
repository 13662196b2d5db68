package takedown_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/takedown"
)

func TestNewSelector(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		kind  takedown.Kind
		value string
		want  string // the value kept; "" for an error
	}{
		{"url", takedown.KindURL, "https://a.test/x?y=1", "https://a.test/x?y=1"},
		{"job upper case", takedown.KindJob, "0B6F6C9E-1111-4111-8111-111111111111", "0b6f6c9e-1111-4111-8111-111111111111"},
		{"host", takedown.KindHost, "docs.a.test", "docs.a.test"},
		{"host spelled otherwise", takedown.KindHost, "BÜCHER.Example.", "xn--bcher-kva.example"},
		{"prefix", takedown.KindPrefix, "https://a.test/private/", "https://a.test/private/"},
		{"prefix of an origin", takedown.KindPrefix, "HTTPS://user@Example.COM.:443", "https://example.com/"},
		{"url with a port", takedown.KindURL, "http://a.test:0080?q", "http://a.test/?q"},
		{"empty", takedown.KindURL, "", ""},
		{"not http", takedown.KindURL, "ftp://a.test/", ""},
		{"prefix of every page", takedown.KindPrefix, "https://", ""},
		{"host with a path", takedown.KindHost, "a.test/x", ""},
		{"host with a port", takedown.KindHost, "a.test:443", ""},
		{"job not a UUID", takedown.KindJob, "job-1", ""},
		{"control character", takedown.KindURL, "https://a.test/\x1b[2J", ""},
		{"unknown kind", takedown.Kind("site"), "a.test", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sel, err := takedown.NewSelector(tc.kind, tc.value)
			if tc.want == "" {
				if !errors.Is(err, takedown.ErrInvalid) {
					t.Errorf("NewSelector(%s, %q) = %v, %v; want ErrInvalid", tc.kind, tc.value, sel, err)
				}
				return
			}
			if err != nil || sel.Value != tc.want || sel.Kind != tc.kind {
				t.Errorf("NewSelector(%s, %q) = %v, %v; want value %q", tc.kind, tc.value, sel, err, tc.want)
			}
		})
	}
}

// TestSetCovers: the write path's check agrees with each selector's rule.
func TestSetCovers(t *testing.T) {
	t.Parallel()
	const job = "0b6f6c9e-1111-4111-8111-111111111111"
	set := takedown.NewSet([]takedown.Selector{
		{Kind: takedown.KindURL, Value: "https://a.test/one"},
		{Kind: takedown.KindPrefix, Value: "https://b.test/private/"},
		{Kind: takedown.KindHost, Value: "c.test"},
		{Kind: takedown.KindJob, Value: job},
	})
	for _, tc := range []struct {
		job, url string
		want     bool
	}{
		{"", "https://a.test/one", true},
		{"", "https://a.test/one/two", false},
		{"", "https://b.test/private/x", true},
		{"", "https://b.test/public", false},
		{"", "https://c.test:8443/any", true},
		{"", "HTTPS://C.TEST./any", true},
		{"", "https://b.test/private", false},
		{"", "https://B.test:443/private/x", true},
		{"", "https://b.test.evil.test/private/x", false},
		{"", "https://user@c.test/any", true},
		{"", "https://d.c.test/any", false},
		{job, "https://z.test/", true},
		{"", "", false},
	} {
		if got := set.Covers(tc.job, tc.url); got != tc.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", tc.job, tc.url, got, tc.want)
		}
	}
	if !takedown.NewSet(nil).Empty() || set.Empty() {
		t.Error("Empty is wrong")
	}
	if !set.CoversBody("", []byte(`{"data":{"pages":[{"url":"https://c.test/p"}]}}`)) || set.CoversBody("x", []byte(`{"data":"https://z.test/"}`)) {
		t.Error("CoversBody: a URL of the host inside the body must match, another must not")
	}
	if !set.CoversBody("", []byte(`{"id":"`+job+`"}`)) || set.CoversBody("", []byte(`not json`)) {
		t.Error("CoversBody: the job's id at the top of the body must match, a body that is not JSON must not")
	}
}

// spellings are URLs of one page under other spellings of its origin: the
// host's case, its final dot, its IDNA and Unicode forms, percent escapes,
// userinfo and the default port.
var spellings = []string{
	"https://bücher.example/private/x",
	"https://BÜCHER.example/private/x",
	"https://Bücher.Example./private/x",
	"https://xn--bcher-kva.example/private/x",
	"https://XN--BCHER-KVA.EXAMPLE./private/x",
	"HTTPS://xn--bcher-kva.example:443/private/x",
	"https://xn--bcher-kva.example.:0443/private/x",
	"https://user:pw@b%C3%BCcher.example/private/x",
	"https://ｂüｃｈｅｒ.example/private/x",
	"https://bücher。example/private/x",
}

// TestOneSpellingOfHosts: every spelling of a host is covered by a host, URL
// and prefix takedown of any other spelling of it, and by nothing else;
// neighbours that only start like it are not.
func TestOneSpellingOfHosts(t *testing.T) {
	t.Parallel()
	for _, spelling := range spellings {
		if h := takedown.NormalizeHost(mustOriginHost(t, spelling)); h != "xn--bcher-kva.example" {
			t.Errorf("the host of %q normalises to %q, want xn--bcher-kva.example", spelling, h)
		}
	}
	for _, sel := range []struct {
		kind  takedown.Kind
		value string
	}{
		{takedown.KindHost, "bücher.example"},
		{takedown.KindHost, "XN--BCHER-KVA.EXAMPLE."},
		{takedown.KindURL, "https://BÜCHER.example./private/x"},
		{takedown.KindPrefix, "https://xn--bcher-kva.example/private"},
		{takedown.KindPrefix, "https://bücher.example"},
	} {
		s, err := takedown.NewSelector(sel.kind, sel.value)
		if err != nil {
			t.Fatal(err)
		}
		set := takedown.NewSet([]takedown.Selector{s})
		for _, u := range spellings {
			if !set.Covers("", u) || !s.MatchURL(u) {
				t.Errorf("%s does not cover %q", s, u)
			}
			// A stored delivery naming it, its JSON escaping '/' and
			// non-ASCII as some encoders do.
			body := `{"data":[{"metadata":{"url":` + strings.ReplaceAll(strconv.QuoteToASCII(u), "/", `\/`) + `}}]}`
			if !set.CoversBody("", []byte(body)) {
				t.Errorf("%s does not cover the delivery %s", s, body)
			}
		}
		others := []string{
			"https://bücher.example.evil.test/private/x",
			"https://bücher.examples/private/x",
			"https://evil.test/?u=https://bücher.example/private/x",
			"https://evil.test\\@bücher.example/private/x",
		}
		if s.Kind != takedown.KindHost {
			// Another scheme or port is another site; a host takedown
			// covers them all.
			others = append(others, "http://bücher.example/private/x", "https://bücher.example:8443/private/x")
		}
		for _, u := range others {
			if set.Covers("", u) {
				t.Errorf("%s covers %q", s, u)
			}
		}
	}
}

// TestPrefixBoundaries: a prefix covers its own URL and what continues it
// at a boundary, never another host nor a longer path segment.
func TestPrefixBoundaries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix, url string
		want        bool
	}{
		{"https://example.com", "https://example.com", true},
		{"https://example.com", "https://example.com/a/b?c", true},
		{"https://example.com", "https://example.community/", false},
		{"https://example.com", "https://example.com.evil.test/", false},
		{"https://example.com", "https://example.com:8443/", false},
		{"https://example.com/private", "https://example.com/private", true},
		{"https://example.com/private", "https://example.com/private/x", true},
		{"https://example.com/private", "https://example.com/private?x=1", true},
		{"https://example.com/private", "https://example.com/private#top", true},
		{"https://example.com/private", "https://example.com/privateer", false},
		{"https://example.com/private/", "https://example.com/private", false},
		{"https://example.com/search?", "https://example.com/search?q=1", true},
	} {
		sel, err := takedown.NewSelector(takedown.KindPrefix, tc.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if got := sel.MatchURL(tc.url); got != tc.want {
			t.Errorf("prefix %q covers %q: %v, want %v", tc.prefix, tc.url, got, tc.want)
		}
	}
}

func mustOriginHost(t *testing.T, u string) string {
	t.Helper()
	raw, _ := takedown.SplitURL(u)
	o, ok := takedown.ParseOrigin(raw)
	if !ok {
		t.Fatalf("%q has no origin", u)
	}
	return o.Host
}
