package events

// Change classes: what a page version is against the version of the same
// URL that the job before it archived. The archive computes them (the
// page_changes and page_removals views, config/migrations/0013 and 0014,
// whose SQL spells the same words); the read API's change filter, the
// pages and the change summaries name them with these constants
// (docs/search.md, "What changed").
const (
	// ChangeNew: no earlier job archived the URL.
	ChangeNew = "new"
	// ChangeChanged: the text differs from the previous version's, or a
	// URL that answered 404 or 410 is back.
	ChangeChanged = "changed"
	// ChangeSame: the text equals the previous version's once whitespace
	// is normalised.
	ChangeSame = "same"
	// ChangeRemoved: the URL now answers 404 or 410, or a complete job of
	// the scope no longer found it.
	ChangeRemoved = "removed"
)

// ChangeClasses returns every change class, in the order users read them:
// new, changed, same, removed. The slice is the caller's.
func ChangeClasses() []string {
	return []string{ChangeNew, ChangeChanged, ChangeSame, ChangeRemoved}
}
