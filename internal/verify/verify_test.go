package verify

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoldenVectors: the signatures the real sender made for the fixtures
// (../../testdata/fixtures, byte-exact copies of ../shared/fixtures) verify
// over the raw bytes, and Header reproduces them.
func TestGoldenVectors(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "testdata", "fixtures")
	tsv, err := os.ReadFile(filepath.Join(dir, "SIGNATURES.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := New([]string{"test-secret"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(tsv)), "\n") {
		name, sig, _ := strings.Cut(line, "\t")
		body, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(sig, body); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if got := Header("test-secret", body); got != sig {
			t.Errorf("%s: Header = %s, want %s", name, got, sig)
		}
		n++
	}
	if n != 3 {
		t.Errorf("%d vectors, want 3", n)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"success":true}`)
	v, err := New([]string{"old", " new ", ""})
	if err != nil {
		t.Fatal(err)
	}
	good := Header("new", body)
	for _, tc := range []struct {
		name   string
		header string
		body   []byte
		want   error
	}{
		{"new secret", good, body, nil},
		{"old secret", Header("old", body), body, nil},
		{"upper-case prefix and hex", "SHA256=" + strings.ToUpper(good[7:]), body, nil},
		{"blanks around", "  " + good + " ", body, nil},
		{"other secret", Header("other", body), body, ErrMismatch},
		{"other body", good, []byte(`{"success":false}`), ErrMismatch},
		{"empty", "", body, ErrMissing},
		{"only blanks", "   ", body, ErrMissing},
		{"no prefix", good[7:], body, ErrMalformed},
		{"sha1", "sha1=" + good[7:47], body, ErrMalformed},
		{"short", good[:70], body, ErrMalformed},
		{"long", good + "00", body, ErrMalformed},
		{"not hex", "sha256=" + strings.Repeat("g", 64), body, ErrMalformed},
		{"prefix only", "sha256=", body, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := v.Verify(tc.header, tc.body)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNewNeedsASecret(t *testing.T) {
	t.Parallel()
	if _, err := New([]string{"", "  "}); err == nil {
		t.Error("New accepted no secret")
	}
}

// FuzzParse: Parse never panics, and accepts exactly "sha256=" (any case)
// with 64 hex digits.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "sha256=", "sha256=04a8f717fcf5515852db86128a52e9a9912c0345ad4a52bc282b001ee1cfdf1a", "SHA256=zz", "sha1=abc", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		var mac [32]byte
		err := parse(h, &mac)
		if err != nil && !errors.Is(err, ErrMissing) && !errors.Is(err, ErrMalformed) {
			t.Fatalf("parse(%q): unexpected error %v", h, err)
		}
		// What parses is what Header writes, for some MAC: the round trip
		// holds.
		if err == nil && !strings.EqualFold(strings.TrimSpace(h), "sha256="+hex.EncodeToString(mac[:])) {
			t.Fatalf("parse(%q) = %x", h, mac)
		}
	})
}

// TestVerifyAny: any one valid value is enough, a wrong value never passes
// on its own nor stops a valid one, and the error says what was wrong.
func TestVerifyAny(t *testing.T) {
	t.Parallel()
	v, err := New([]string{"old", "new"})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"crawl.page"}`)
	good := Header("new", body)
	wrong := Header("other", body)
	for _, tc := range []struct {
		name    string
		headers []string
		want    error
	}{
		{"first valid", []string{good, ""}, nil},
		{"second valid", []string{"", good}, nil},
		{"wrong then valid", []string{wrong, good}, nil},
		{"valid then malformed", []string{good, "sha256=zz"}, nil},
		{"both wrong", []string{wrong, wrong}, ErrMismatch},
		{"wrong and malformed", []string{"sha256=zz", wrong}, ErrMismatch},
		{"malformed only", []string{"", "md5=abc"}, ErrMalformed},
		{"none", []string{"", ""}, ErrMissing},
		{"no headers", nil, ErrMissing},
	} {
		err := v.VerifyAny(body, tc.headers...)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := v.VerifyAny([]byte(`{"type":"crawl.pagE"}`), good, good); !errors.Is(err, ErrMismatch) {
		t.Errorf("valid signature of another body: %v", err)
	}
}
