package deploy_test

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// root is the repository root, seen from this module.
const root = ".."

// binaries are the env-configured binaries, named as the sections of
// config/environment.md.
var binaries = []string{"receiver", "sink", "reader"}

// envReference parses config/environment.md into binary → variable →
// default ("" for "—"). config/reference_test.go checks the same file
// against the binaries' config structs.
func envReference(t *testing.T) map[string]map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config", "environment.md"))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	doc := map[string]map[string]string{}
	var section map[string]string
	for _, line := range strings.Split(string(data), "\n") {
		if s, ok := strings.CutPrefix(line, "## "); ok {
			section = map[string]string{}
			doc[strings.TrimSpace(s)] = section
			continue
		}
		if section == nil || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 3 || !name.MatchString(strings.TrimSpace(cells[0])) {
			continue
		}
		def := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if def == "—" {
			def = ""
		}
		section[strings.TrimSpace(cells[0])] = def
	}
	for _, b := range binaries {
		if len(doc[b]) == 0 {
			t.Fatalf("config/environment.md has no variables under \"## %s\"", b)
		}
	}
	return doc
}

// checkVars reports the names that binary does not read.
func checkVars(t *testing.T, ref map[string]map[string]string, binary, where string, names []string) {
	t.Helper()
	var unknown []string
	for _, n := range names {
		if _, ok := ref[binary][n]; !ok {
			unknown = append(unknown, n)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("%s sets %v, which %s does not read (config/environment.md)", where, unknown, binary)
	}
}

// listenPort is the port of a Go listen address such as ":8080".
func listenPort(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return port
}
