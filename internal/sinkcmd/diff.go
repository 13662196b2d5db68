package sinkcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/textdiff"
	"github.com/google/uuid"
)

// diffArgs reads the arguments of `sink diff <url> [--from JOB] [--to JOB]`,
// the flags before or after the URL.
func diffArgs(args []string) (url, from, to string, err error) {
	const usage = "usage: sink diff <url> [--from JOB] [--to JOB]"
	fs := flag.NewFlagSet("sink diff", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := fs.String("from", "", "")
	t := fs.String("to", "", "")
	var urls []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", "", "", fmt.Errorf("sink diff: %w (%s)", err, usage)
		}
		if fs.NArg() == 0 {
			break
		}
		urls = append(urls, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(urls) != 1 || urls[0] == "" {
		return "", "", "", errors.New(usage)
	}
	return urls[0], *f, *t, nil
}

// runDiff is `sink diff`: the unified diff of two archived versions of a
// page's markdown (archive.Reader.Versions picks them, textdiff compares
// them). It only reads. The page's text and its URL are hostile: every
// line goes through terminalText.
func runDiff(ctx context.Context, cfg Config, args []string, stdout io.Writer) error {
	url, fromJob, toJob, err := diffArgs(args)
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
	case errors.Is(err, archive.ErrNoPage):
		return fmt.Errorf("sink diff: the archive has no version of %s", shown)
	case errors.Is(err, archive.ErrOneVersion):
		job := fromJob // the one version is --from's when the newer was sought elsewhere
		if to.CrawlID != uuid.Nil {
			job = to.CrawlID.String()
		}
		return fmt.Errorf("sink diff: the archive has only one version of %s (job %s): nothing to compare", shown, job)
	case errors.Is(err, archive.ErrNoVersion):
		return fmt.Errorf("sink diff: %s: %w", shown, err)
	case err != nil:
		return fmt.Errorf("sink diff: %w", err)
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
func versionName(v archive.Version) string {
	return fmt.Sprintf("(job %s, received %s, status %d)", v.CrawlID, v.ReceivedAt.UTC().Format(time.RFC3339), v.StatusCode)
}
