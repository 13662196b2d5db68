// Package version holds the version and commit stamped into the binaries
// at build time (-ldflags -X), shown by --version and in image labels.
package version

// Set by the linker; "dev" and "none" in plain `go build`s.
var (
	Version = "dev"
	Commit  = "none"
)

// String is "<version> (<commit>)".
func String() string { return Version + " (" + Commit + ")" }
