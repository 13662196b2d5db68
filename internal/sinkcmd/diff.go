package sinkcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/reader"

	"github.com/crawlhouse/crawlhouse/internal/textdiff"
	"github.com/google/uuid"
)

// diffArgs reads the arguments of `sink diff <url> [--from JOB] [--to JOB]`,
// the flags before or after the URL.
func diffArgs(args []string) (url, from, to string, asJSON bool, err error) {
	const usage = "usage: sink diff <url> [--from JOB] [--to JOB] [--json]"
	fs := flag.NewFlagSet("sink diff", flag.ContinueOnError)
	f := fs.String("from", "", "")
	t := fs.String("to", "", "")
	j := fs.Bool("json", false, "")
	urls, err := parseInterspersed(fs, args)
	if err != nil {
		return "", "", "", false, fmt.Errorf("sink diff: %w (%s)", err, usage)
	}
	if len(urls) != 1 || urls[0] == "" {
		return "", "", "", false, errors.New(usage)
	}
	return urls[0], *f, *t, *j, nil
}

// statusArgs reads the arguments of `sink status [--json] <crawl-id>`.
func statusArgs(args []string) (crawlID string, asJSON bool, err error) {
	const usage = "usage: sink status [--json] <crawl-id>"
	fs := flag.NewFlagSet("sink status", flag.ContinueOnError)
	j := fs.Bool("json", false, "")
	ids, err := parseInterspersed(fs, args)
	if err != nil {
		return "", false, fmt.Errorf("sink status: %w (%s)", err, usage)
	}
	if len(ids) != 1 || ids[0] == "" {
		return "", false, errors.New(usage)
	}
	return ids[0], *j, nil
}

// parseInterspersed parses fs's flags before, between and after the
// arguments, and returns the arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var out []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return out, nil
		}
		out = append(out, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// runDiff is `sink diff`: the unified diff of two archived versions of a
// page's markdown (query.Reader.Versions picks them, textdiff compares
// them). It only reads. The page's text and its URL are hostile: every
// line goes through terminalText.
func runDiff(ctx context.Context, cfg Config, args []string, stdout io.Writer) error {
	url, fromJob, toJob, asJSON, err := diffArgs(args)
	if err != nil {
		return err
	}
	r, done, err := openReader(cfg)
	if err != nil {
		return err
	}
	defer done()
	shown := terminalText(url, 300)
	from, to, err := r.Versions(ctx, url, fromJob, toJob)
	switch {
	case errors.Is(err, query.ErrNoPage):
		return fmt.Errorf("sink diff: the archive has no version of %s", shown)
	case errors.Is(err, query.ErrOneVersion):
		job := fromJob // the one version is --from's when the newer was sought elsewhere
		if to.CrawlID != uuid.Nil {
			job = to.CrawlID.String()
		}
		return fmt.Errorf("sink diff: the archive has only one version of %s (job %s): nothing to compare", shown, job)
	case errors.Is(err, query.ErrNoVersion):
		return fmt.Errorf("sink diff: %s: %w", shown, err)
	case err != nil:
		return fmt.Errorf("sink diff: %w", err)
	}
	if asJSON {
		return writeJSON(stdout, reader.NewDiffAnswer(url, from, to))
	}
	d := textdiff.Diff(from.Markdown, to.Markdown)
	if !d.Changed() {
		fmt.Fprintf(stdout, "no change in %s between %s and %s\n", shown, versionName(from), versionName(to))
		return nil
	}
	out := d.Unified(shown+" "+versionName(from), shown+" "+versionName(to))
	for line := range strings.Lines(out) {
		line = strings.TrimSuffix(line, "\n")
		fmt.Fprintln(stdout, terminalText(line, len(line)))
	}
	return nil
}

// versionName names a version in a diff's header.
func versionName(v query.Version) string {
	return fmt.Sprintf("(job %s, received %s, status %d)", v.CrawlID, v.ReceivedAt.UTC().Format(time.RFC3339), v.StatusCode)
}
