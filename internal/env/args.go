package env

import (
	"fmt"
	"io"

	"github.com/crawlhouse/crawlhouse/internal/version"
)

// Args handles the arguments a binary takes besides its subcommands and
// its environment: --help writes usage, --version the binary's name and
// version; anything else is a usage error naming it. done is true when the
// binary has nothing more to do.
func Args(args []string, name string, stdout io.Writer, usage func(io.Writer)) (done bool, err error) {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help", "help":
			usage(stdout)
			return true, nil
		case "-version", "--version", "version":
			fmt.Fprintln(stdout, name, version.String())
			return true, nil
		default:
			return true, Usagef("unknown argument %q (try --help)", a)
		}
	}
	return false, nil
}
