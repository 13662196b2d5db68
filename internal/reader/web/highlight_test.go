package web

import (
	"reflect"
	"testing"
)

func TestHighlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, snippet, query string
		want                 []span
	}{
		{"word any case", "Zebrafish swim; zebrafishes too", "zebrafish",
			[]span{{"Zebrafish", true}, {" swim; zebrafishes too", false}}},
		{"phrase across punctuation", "the quick, brown fox and brown quick", `"quick brown"`,
			[]span{{"the ", false}, {"quick, brown", true}, {" fox and brown quick", false}}},
		{"several words", "a b c", "a c",
			[]span{{"a", true}, {" b ", false}, {"c", true}}},
		{"markup stays text", "<script>zebra</script>", "script",
			[]span{{"<", false}, {"script", true}, {">zebra</", false}, {"script", true}, {">", false}}},
		{"no match", "nothing here", "zebra", []span{{"nothing here", false}}},
		{"empty", "", "zebra", nil},
		{"unicode", "Größe ÄRGER", "größe ärger", []span{{"Größe", true}, {" ", false}, {"ÄRGER", true}}},
	} {
		if got := highlight(tc.snippet, tc.query); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: highlight(%q, %q) = %v, want %v", tc.name, tc.snippet, tc.query, got, tc.want)
		}
	}
}
