package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
)

// The demo's site jobs (scripts/run.sh): a crawl of 12 pages and its
// recrawl, with 2 pages edited, 1 reordered, 1 answering 404, 1 no longer
// linked and 1 added.
const (
	demoCrawl   = "0193c000-0000-7000-8000-00000000de01"
	demoRecrawl = "0193c000-0000-7000-8000-00000000de02"
	demoSite    = "https://docs.example.org"
)

// TestMakeRun runs `make run`'s script as users run it, but exiting once it
// has printed (RUN_EXIT=1): it builds the binaries, starts the receiver with
// embedded JetStream, the sink and the reader on the shared ClickHouse (a
// database of the test's), and sends crawlsim's jobs. The recrawl's classes,
// in the archive and through the reader's API, are the edits crawlsim made; the links it
// printed (the recrawl's job page first, then a diff per changed page) answer
// 200 from a reader on the same archive, the diffs showing the edit.
func TestMakeRun(t *testing.T) {
	t.Parallel()
	// The script's own tools, which every machine that runs make run has
	// (no script of the project installs them): missing, the test fails
	// saying which.
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatal("make run needs " + tool + ": " + err.Error())
		}
	}
	addr, db := clickhousetest.NewDatabase(t)
	p := &pipeline{chAddr: addr, db: db, conn: clickhousetest.Open(t, db)}
	port := func() string {
		_, port, _ := net.SplitHostPort(freeAddr(t))
		return port
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, "bash", "scripts/run.sh")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "RUN_EXIT=1", "VAR="+dir+"/var", "BIN="+dir+"/bin",
		"CLICKHOUSE_ADDR="+addr, "CLICKHOUSE_HTTP="+clickhousetest.HTTPURL(t), "CLICKHOUSE_DATABASE="+db,
		"PAGES=30", "BATCH_PAGES=5", "READER_TOKEN="+readerToken, "NEW_READER_TOKEN=0",
		"RECEIVER_PORT="+port(), "SINK_PORT="+port(), "CRAWLSIM_PORT="+port(), "NATS_PORT="+port(), "READER_PORT="+port())
	// Interrupted, the script stops what it started, as Ctrl-C does.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/run.sh: %v\n%s", err, out)
	}
	jobPage, diffs, links := demoLinks(t, out)
	if jobPage != "/ui/jobs/"+demoRecrawl {
		t.Errorf("the job page printed first is %q, want the recrawl's", jobPage)
	}

	want := map[string]string{demoSite + "/added/0": "new"}
	for i := range 12 {
		class := "same"
		switch {
		case i < 3: // 2 edited, 1 reordered
			class = "changed"
		case i == 3, i == 11: // answering 404; no longer linked
			class = "removed"
		}
		want[fmt.Sprintf("%s/page/%d", demoSite, i)] = class
	}
	if got := p.classesOf(t, demoRecrawl); !maps.Equal(got, want) {
		t.Errorf("the recrawl's classes in the archive:\n got %v\nwant %v", got, want)
	}
	// The read API shows the classes of versions; the URL no longer found
	// has none in the recrawl (the archive's page_removals above).
	found := maps.Clone(want)
	delete(found, demoSite+"/page/11")
	base := p.startReader(t, os.Stderr)
	if got := demoClasses(t, base); !maps.Equal(got, found) {
		t.Errorf("the recrawl's classes through the read API:\n got %v\nwant %v", got, found)
	}
	var changed []string
	for u, class := range want {
		if class == "changed" {
			changed = append(changed, u)
		}
	}
	slices.Sort(changed)
	if got := slices.Sorted(maps.Keys(diffs)); !slices.Equal(got, changed) {
		t.Errorf("diff links printed for %v, want the changed pages %v", got, changed)
	}
	for _, link := range links {
		status, body := readerGet(t, base+link)
		if status != 200 {
			t.Errorf("printed link %s: %d\n%s", link, status, body)
		}
		if link == diffs[demoSite+"/page/0"] && !strings.Contains(body, strings.TrimSpace(crawlsim.EditedSentence)) {
			t.Errorf("the edited page's diff %s does not show the edit:\n%s", link, body)
		}
	}
}

// demoLinks reads the reader's pages the script printed (path and query):
// the first job page, the diffs by the URL they compare, and all of them.
func demoLinks(t *testing.T, out []byte) (jobPage string, diffs map[string]string, links []string) {
	t.Helper()
	diffs = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			u, err := url.Parse(f)
			if err != nil || u.Scheme != "http" || !strings.HasPrefix(u.Path, "/ui/") {
				continue
			}
			link := u.RequestURI()
			links = append(links, link)
			switch {
			case jobPage == "" && strings.HasPrefix(u.Path, "/ui/jobs/"):
				jobPage = link
			case u.Path == "/ui/diff":
				diffs[u.Query().Get("url")] = link
			}
		}
	}
	if len(links) == 0 {
		t.Fatalf("the script printed no link to the reader's pages:\n%s", out)
	}
	return jobPage, diffs, links
}

// demoClasses is the class of each page version of the recrawl, as the
// read API's search lists them.
func demoClasses(t *testing.T, base string) map[string]string {
	t.Helper()
	got := map[string]string{}
	status, body := readerGet(t, base+"/v1/search?limit=100&job="+demoRecrawl)
	var hits struct {
		Hits []struct{ URL, Change string }
	}
	if err := json.Unmarshal([]byte(body), &hits); status != 200 || err != nil {
		t.Fatalf("search: %d %v\n%s", status, err, body)
	}
	for _, h := range hits.Hits {
		got[h.URL] = h.Change
	}
	return got
}
