// Package archivetools runs, from tests, the readers that archivists' and
// data teams' tools are built on (webrecorder's warcio, hyparquet) over
// the files crawlhouse exports: readers other than the libraries that
// write them, so that a file the writer's own library would accept but
// others would not fails a test. ReplayDir finds the replay tool
// (webrecorder's ReplayWeb.page) that internal/testkit/replaytest serves
// to a browser.
//
// They are npm packages that scripts/archivetools.sh installs, pinned, into
// var/archivetools (or the directory EnvDir names); they run under node.
// Without them a test skips, or fails under CI=true: a missing dependency
// never passes silently there.
package archivetools

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// EnvDir names the directory the tools are installed in, if not the
// repository's var/archivetools.
const EnvDir = "ARCHIVE_TOOLS_DIR"

// Dir is where the tools are installed, or "" if they are not.
func Dir() string {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return ""
		}
		dir = filepath.Join(root, "var", "archivetools")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "warcio")); err != nil {
		return ""
	}
	return dir
}

// ReplayDir is the directory of ReplayWeb.page's ui.js (the
// <replay-web-page> embed and the app it frames) and sw.js (the service
// worker that reads an archive and replays from it). Without them it skips
// t, or fails it under CI=true.
func ReplayDir(t testing.TB) string {
	t.Helper()
	if dir := Dir(); dir != "" {
		replay := filepath.Join(dir, "node_modules", "replaywebpage")
		_, errUI := os.Stat(filepath.Join(replay, "ui.js"))
		_, errSW := os.Stat(filepath.Join(replay, "sw.js"))
		if errUI == nil && errSW == nil {
			return replay
		}
	}
	missing(t, "archivetools: no ReplayWeb.page (run scripts/archivetools.sh, or set "+EnvDir+")")
	return ""
}

// missing skips t for want of a tool, or fails it under CI=true: a
// missing dependency never passes silently there.
func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Run runs script (a file of node ES module code) under node with the
// tools' directory and args as its arguments, and returns what it
// printed. A script that fails fails t, with what it wrote to stderr.
func Run(t testing.TB, script string, args ...string) []byte {
	t.Helper()
	dir := Dir()
	node, err := exec.LookPath("node")
	if dir == "" || err != nil {
		missing(t, "archivetools: no node or no tools (run scripts/archivetools.sh, or set "+EnvDir+")")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(node, append([]string{script, dir}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("archivetools: node %s: %v\n%s", filepath.Base(script), err, stderr.String())
	}
	return stdout.Bytes()
}

// repoRoot is the directory of the go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
