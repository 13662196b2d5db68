package web

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// span is a run of a snippet's text; match marks a word or phrase of the
// query. Spans are plain text: the templates escape them.
type span struct {
	Text  string
	Match bool
}

// Bounds of highlighting: a snippet longer than maxSnippet bytes is cut
// (the archive's are 240 characters), and at most maxTerms words and
// phrases of a query are marked.
const (
	maxSnippet = 2000
	maxTerms   = 16
)

// token is a run of letters and digits of a text, as the archive's text
// index splits it, at bytes [start, end).
type token struct {
	text       string
	start, end int
}

func tokens(s string) []token {
	var out []token
	start := -1
	for i, r := range s {
		word := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			out = append(out, token{s[start:i], start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, token{s[start:], start, len(s)})
	}
	return out
}

// terms splits a query's text into its words and "quoted phrases", each as
// its tokens.
func terms(query string) [][]string {
	var out [][]string
	for i, part := range strings.Split(query, `"`) {
		if i%2 == 1 { // inside quotes: a phrase
			if ts := tokens(part); len(ts) > 0 {
				out = append(out, texts(ts))
			}
			continue
		}
		for _, t := range tokens(part) {
			out = append(out, []string{t.text})
		}
	}
	return out[:min(len(out), maxTerms)]
}

func texts(ts []token) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.text
	}
	return out
}

// highlight cuts snippet into spans, marking every occurrence of the
// query's words (a whole token, any case) and phrases (their tokens in a
// row, any case).
func highlight(snippet, query string) []span {
	if len(snippet) > maxSnippet {
		snippet = snippet[:maxSnippet]
	}
	snippet = strings.ToValidUTF8(snippet, string(utf8.RuneError))
	ts, qs := tokens(snippet), terms(query)
	marked := make([]bool, len(snippet)+1)
	for i := range ts {
		for _, q := range qs {
			if i+len(q) > len(ts) {
				continue
			}
			all := true
			for j, w := range q {
				all = all && strings.EqualFold(ts[i+j].text, w)
			}
			if all {
				for b := ts[i].start; b < ts[i+len(q)-1].end; b++ {
					marked[b] = true
				}
			}
		}
	}
	var out []span
	start := 0
	for b := 1; b <= len(snippet); b++ {
		if b == len(snippet) || marked[b] != marked[start] {
			out = append(out, span{Text: snippet[start:b], Match: marked[start]})
			start = b
		}
	}
	return out
}
