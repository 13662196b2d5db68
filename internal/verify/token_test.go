package verify

import (
	"errors"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	const old, cur = "old-token-0123456789", "new-token-abcdefghij"
	tok, err := NewTokens([]string{" " + old + " ", "", cur})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, header string
		ok           bool
	}{
		{"bearer", "Bearer " + cur, true},
		{"bearer lower case, blanks", "  bearer   " + old + " ", true},
		{"bare token", cur, true},
		{"empty", "", false},
		{"bearer alone", "Bearer ", false},
		{"wrong", "Bearer " + cur[:len(cur)-1] + "k", false},
		{"prefix of a token", "Bearer " + cur[:10], false},
		{"token plus more", "Bearer " + cur + "x", false},
		{"other scheme", "Basic " + cur, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tok.Check(tc.header)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrToken) {
				t.Fatalf("got %v, want ErrToken", err)
			}
			if err != nil && strings.Contains(err.Error(), "token-") {
				t.Fatalf("error quotes the token: %v", err)
			}
		})
	}
}

func TestNewTokensRefuses(t *testing.T) {
	t.Parallel()
	for name, in := range map[string][]string{"none": nil, "blank": {" ", ""}, "short": {"s3cr3t-short"}} {
		_, err := NewTokens(in)
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: error quotes the token: %v", name, err)
		}
	}
}
