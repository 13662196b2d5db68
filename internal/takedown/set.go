package takedown

// Set is the takedowns in force, indexed for the write path: a lookup per
// row costs parsing its URL's origin once, a map access per kind and one
// comparison per prefix.
type Set struct {
	all []Selector
	m   matcher
}

// matcher compares URLs with selectors in the one spelling of Location:
// values recorded before they were kept normalised match like new ones.
type matcher struct {
	urls     map[Location]bool
	hosts    map[string]bool
	jobs     map[string]bool
	prefixes []Location
}

func newMatcher(selectors []Selector) matcher {
	m := matcher{urls: map[Location]bool{}, hosts: map[string]bool{}, jobs: map[string]bool{}}
	for _, sel := range selectors {
		switch sel.Kind {
		case KindURL:
			if loc, ok := ParseLocation(sel.Value); ok {
				m.urls[loc] = true
			}
		case KindHost:
			m.hosts[NormalizeHost(sel.Value)] = true
		case KindJob:
			m.jobs[sel.Value] = true
		case KindPrefix:
			if loc, ok := ParseLocation(sel.Value); ok {
				m.prefixes = append(m.prefixes, loc)
			}
		}
	}
	return m
}

func (m matcher) empty() bool {
	return len(m.urls)+len(m.hosts)+len(m.jobs)+len(m.prefixes) == 0
}

func (m matcher) matchURL(u string) bool {
	if len(m.urls)+len(m.hosts)+len(m.prefixes) == 0 {
		return false
	}
	loc, ok := ParseLocation(u)
	if !ok {
		return false
	}
	if m.urls[loc] || m.hosts[loc.Origin.Host] {
		return true
	}
	for _, p := range m.prefixes {
		if loc.HasPrefix(p) {
			return true
		}
	}
	return false
}

// NewSet indexes selectors.
func NewSet(selectors []Selector) *Set {
	return &Set{all: selectors, m: newMatcher(selectors)}
}

// Empty reports whether no takedown is in force (the common case, checked
// first so that the write path pays nothing else).
func (s *Set) Empty() bool {
	return s == nil || s.m.empty()
}

// Covers reports whether a row of job jobID (a lower-case UUID) and URL u
// is taken down.
func (s *Set) Covers(jobID, u string) bool {
	if s.Empty() {
		return false
	}
	return s.m.jobs[jobID] || s.m.matchURL(u)
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
