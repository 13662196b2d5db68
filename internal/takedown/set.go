package takedown

// Set is the takedowns in force, indexed for the write path: a lookup per
// row costs a map access per kind plus one comparison per prefix.
type Set struct {
	all      []Selector
	urls     map[string]bool
	hosts    map[string]bool
	jobs     map[string]bool
	prefixes []string
}

// NewSet indexes selectors.
func NewSet(selectors []Selector) *Set {
	s := &Set{all: selectors, urls: map[string]bool{}, hosts: map[string]bool{}, jobs: map[string]bool{}}
	for _, sel := range selectors {
		switch sel.Kind {
		case KindURL:
			s.urls[sel.Value] = true
		case KindHost:
			s.hosts[sel.Value] = true
		case KindJob:
			s.jobs[sel.Value] = true
		case KindPrefix:
			s.prefixes = append(s.prefixes, sel.Value)
		}
	}
	return s
}

// Empty reports whether no takedown is in force (the common case, checked
// first so that the write path pays nothing else).
func (s *Set) Empty() bool {
	return s == nil || len(s.urls)+len(s.hosts)+len(s.jobs)+len(s.prefixes) == 0
}

// Covers reports whether a row of job jobID (a lower-case UUID) and URL u
// is taken down.
func (s *Set) Covers(jobID, u string) bool {
	if s.Empty() {
		return false
	}
	if s.urls[u] || s.jobs[jobID] {
		return true
	}
	for _, p := range s.prefixes {
		if len(u) >= len(p) && u[:len(p)] == p {
			return true
		}
	}
	return len(s.hosts) > 0 && s.hosts[Host(u)]
}

// CoversBody reports whether a whole event kept as received (a raw event of
// job jobID) is taken down: Selector.MatchBody of any takedown.
func (s *Set) CoversBody(jobID string, body []byte) bool {
	if s.Empty() {
		return false
	}
	for _, sel := range s.all {
		if sel.MatchBody(jobID, body) {
			return true
		}
	}
	return false
}
