package takedown_test

import (
	"errors"
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
		{"prefix", takedown.KindPrefix, "https://a.test/private/", "https://a.test/private/"},
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
