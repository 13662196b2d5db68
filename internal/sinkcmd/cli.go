package sinkcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/crawlhouse/crawlhouse/internal/backfill"
	"github.com/crawlhouse/crawlhouse/internal/env"
)

// commands are the sink's subcommands ("" is the sink itself) and their
// one-line help.
var commands = map[string]string{
	"":         "consume deliveries from JetStream into ClickHouse (applies migrations first)",
	"migrate":  "apply the ClickHouse schema migrations and exit",
	"backfill": "reconcile one crawl against the crawl API now: backfill [-kind crawl|batch_scrape] <crawl-id>",
	"redrive":  "move every dead letter back to the events stream for another try",
	"status":   "how one crawl or batch scrape went, from the archive and the crawl API: status [--json] <crawl-id>",
	"diff":     "what changed in a page between two jobs, as a unified diff of its markdown: diff <url> [--from JOB] [--to JOB] [--json]",
	"delete":   "take down a URL, prefix, host or job: remove it from the archive, dead letters and quarantine, and keep it out until lifted",
	"probe":    "GET a URL and exit 0 on a 2xx answer (container healthcheck): probe <url>",
}

func parseArgs(args []string) (cmd string, rest []string, help bool, err error) {
	if len(args) > 0 {
		args = args[1:]
	}
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help", "help":
			help = true
		case "-version", "--version", "version":
			if cmd == "" {
				cmd = "version"
			}
		default:
			if (cmd == "backfill" || cmd == "diff" || cmd == "delete" || cmd == "status") && strings.HasPrefix(a, "-") {
				rest = append(rest, a) // -kind, read by backfillArgs; --from, --to, --json by diffArgs; --json by statusArgs; delete's by deleteArgs
				continue
			}
			if strings.HasPrefix(a, "-") {
				return "", nil, false, fmt.Errorf("unknown flag %q (try --help)", a)
			}
			if cmd == "" {
				if _, ok := commands[a]; !ok {
					return "", nil, false, fmt.Errorf("unknown command %q (try --help)", a)
				}
				cmd = a
				continue
			}
			rest = append(rest, a)
		}
	}
	if help {
		return cmd, rest, true, nil
	}
	switch {
	case cmd == "backfill":
		if _, _, err := backfillArgs(rest); err != nil {
			return "", nil, false, err
		}
	case cmd == "diff":
		if _, _, _, _, err := diffArgs(rest); err != nil {
			return "", nil, false, err
		}
	case cmd == "delete":
		if _, err := deleteArgs(rest); err != nil {
			return "", nil, false, err
		}
	case cmd == "status":
		if _, _, err := statusArgs(rest); err != nil {
			return "", nil, false, err
		}
	case cmd != "backfill" && cmd != "status" && cmd != "diff" && cmd != "delete" && len(rest) > 0:
		return "", nil, false, fmt.Errorf("unexpected argument %q (try --help)", rest[0])
	}
	return cmd, rest, false, nil
}

// backfillArgs reads the arguments of `sink backfill [-kind crawl|batch_scrape]
// <crawl-id>`; kind is "" when not given (backfill.ParseKind).
func backfillArgs(args []string) (crawlID, kind string, err error) {
	fs := flag.NewFlagSet("sink backfill", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	k := fs.String("kind", "", "")
	if err := fs.Parse(args); err != nil {
		return "", "", fmt.Errorf("sink backfill: %w (try --help)", err)
	}
	if fs.NArg() != 1 {
		return "", "", errors.New("usage: sink backfill <crawl-id>, or sink backfill -kind crawl|batch_scrape <crawl-id>")
	}
	if kind, err = backfill.ParseKind(*k); err != nil {
		return "", "", fmt.Errorf("sink backfill -kind: %w", err)
	}
	return fs.Arg(0), kind, nil
}

func usage(w io.Writer, cmd string) {
	switch cmd {
	case "migrate":
		fmt.Fprint(w, "Usage: sink migrate\n\nApplies the embedded ClickHouse schema migrations not yet recorded in\n<CLICKHOUSE_DATABASE>.schema_migrations, prints their names, and exits.\n")
	case "backfill":
		fmt.Fprint(w, "Usage: sink backfill <crawl-id>\n       sink backfill -kind crawl|batch_scrape <crawl-id>\n\nReads every page of the crawl from GET $CRAWL_API_URL/v2/crawl/<crawl-id>\n(a batch scrape's from GET $CRAWL_API_URL/v2/batch/scrape/<id>), archives the\npages not yet in ClickHouse (origin backfill), and prints pages fetched /\ninserted / already present.\n\n-kind says what the job is. Without it the job is read with the kind its\nbackfill state holds, else as a crawl and, when the API does not know it as\none, as a batch scrape; give -kind batch_scrape for a batch scrape that sent\nno delivery, which the crawl API also answers as a crawl.\n")
	case "status":
		fmt.Fprint(w, "Usage: sink status [--json] <crawl-id>\n\nPrints what the archive holds of one crawl or batch scrape (pages received\nand backfilled, failures with the most frequent errors, cancelled pages,\nfirst and last delivery, the last event, the backfill state) and, when\nCRAWL_API_URL is set, whether the crawl API's count of successful pages\nagrees. Reads only; changes nothing.\n\n--json prints the body of the read API's GET /v1/jobs/{id} instead, with\n\"crawl_api\": {\"status\", \"completed\", \"agrees\"} when CRAWL_API_URL is set (or\n{\"error\"} when it does not answer).\n")
	case "diff":
		fmt.Fprint(w, `Usage: sink diff <url> [--from JOB] [--to JOB]

Prints what changed in the page at <url> between two archived versions, as a
unified diff of their markdown (diff -u, 3 lines of context), headed by each
version's job id, time received and status code. By default the versions are
the latest two, of different jobs. --to JOB compares the version of that job
(a crawl or batch scrape id) instead of the newest; --from JOB compares
against that job's version instead of the one received before the newer.

Lines end at \n or \r\n, so a page that only changed its line endings is
unchanged. Large pages diff in bounded time and memory: past a limit, a
changed block is shown whole (removed, then added) and the diff starts with
a "# coarse diff" line. Control characters of the page are shown as spaces or
U+FFFD. Exits 1 when the URL has no two versions to compare. Reads only.
`)
	case "delete":
		fmt.Fprint(w, `Usage: sink delete --url U | --prefix P | --host H | --job J --reason R [--by WHO]
       sink delete --url U | --prefix P | --host H | --job J --dry-run [--json]
       sink delete --lift ID --reason R [--by WHO]
       sink delete --list [--json]

Takes content down: removes every row of the URL (exactly), of every URL
under the prefix, of the host, or of the job (a crawl or batch scrape id)
from pages, failures, page_versions (change tracking), monitor_pages,
blocked_urls, crawl_events and events (raw events naming such a URL), and
the stored deliveries of it from the dead-letter stream and the quarantine
streams. Keeps an audit record in the takedowns table: the selector, the
reason, who asked (--by, else $USER), when, and how many rows and messages
were removed, never the content. Until the takedown is lifted, the sink and
the backfill archive nothing it covers: a replayed or redriven delivery, or
a backfill, does not bring it back.

Hosts match in every spelling: any case, with or without the final dot, in
IDNA (xn--) or Unicode form, percent-escaped; a host covers every scheme and
port. A URL or prefix matches its scheme and host in every spelling and its
port (the default one written or not), then its path: a prefix covers its
own URL and what continues it after '/', '?' or '#' -- whole path segments,
never another host (https://example.com does not cover example.community
or example.com.evil.test, https://a.test/priv does not cover /private).

--dry-run prints how many rows of each table the takedown would remove now,
and removes and records nothing; run it first. --lift ID lets what the
takedown covers be archived again (what was removed stays removed). --list
prints every takedown and what it removed. --json prints the list or the
dry run as JSON (snake_case fields, RFC 3339 times in UTC, as the read API).
Stopped midway, run the same command again: it removes what is left.

Exit codes: 0 done, 1 failed, 2 usage error (the arguments are wrong).
`)
	case "redrive":
		fmt.Fprint(w, "Usage: sink redrive\n\nMoves every message of the dead-letter stream ($SINK_DLQ_STREAM) back to the\nevents stream, to its original subject, for another try, and prints how many.\n")
	default:
		fmt.Fprint(w, `sink: archives crawl deliveries from JetStream into ClickHouse.

Usage:
  sink                      `+commands[""]+`
  sink migrate              `+commands["migrate"]+`
  sink backfill <crawl-id>  `+commands["backfill"]+`
  sink redrive              `+commands["redrive"]+`
  sink status <crawl-id>    `+commands["status"]+`
  sink diff <url>           `+commands["diff"]+`
  sink delete --url U ...   `+commands["delete"]+`
  sink <command> --help     help on a command
  sink --version

Configured by the environment:

`)
		writeEnv(w)
		fmt.Fprint(w, "\nEndpoints on SINK_LISTEN: GET /healthz, GET /readyz, GET /metrics.\n")
	}
	fmt.Fprint(w, "\n"+env.ExitStatusHelp)
}
