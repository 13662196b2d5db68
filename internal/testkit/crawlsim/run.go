package crawlsim

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/events"
)

// Run is the crawlsim binary: it parses args, serves the status and errors
// API, sends one simulated job (a crawl, or a batch scrape with -kind
// batch_scrape) to the target, prints the summary (and writes the
// manifest), then keeps serving the API until ctx ends so that backfill can
// read the crawl (unless -exit). getenv supplies defaults for the key and
// secret (CRAWL_API_KEY, WEBHOOK_SECRET) so they need not be on the command
// line.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("crawlsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage of crawlsim:")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\n"+env.ExitStatusHelp)
	}
	var (
		o        Options
		api      APIOptions
		snd      SenderOptions
		listen   = fs.String("listen", "127.0.0.1:8090", "address of the status API (GET /v2/crawl/{id}, /v2/batch/scrape/{id}, their /errors); empty: no API")
		cancel   = fs.Int("cancel-after", -1, "cancel the job after this many pages: the rest are delivered as cancelled failures, then <kind>.cancelled (-1: never)")
		exit     = fs.Bool("exit", false, "exit after sending instead of serving the API until interrupted")
		retries  = fs.String("retry-delays", "1m,5m,15m", "waits before the retries of a non-2xx delivery, comma-separated")
		manifest = fs.String("manifest", "", "write the JSON manifest of the run to this file")
		seed     = fs.Uint64("seed", 0, "seed for ids, content and fault choice (0: random)")
		batch    = fs.Int("batch-pages", 0, "after the job, send a batch scrape of this many pages with the same faults, served by the same API (0: none)")
	)
	var re Recrawl
	fs.StringVar(&re.Of, "recrawl-of", "", "make the job a recrawl of this earlier job (run with -crawl-id and the same -seed, -site, -pages, -page-bytes), edited by the -recrawl-* counts")
	fs.IntVar(&re.Edited, "recrawl-edited", 1, "recrawl: pages with a sentence added")
	fs.IntVar(&re.Reordered, "recrawl-reordered", 1, "recrawl: pages with their paragraphs reversed")
	fs.IntVar(&re.NotFound, "recrawl-not-found", 1, "recrawl: pages answering 404")
	fs.IntVar(&re.Gone, "recrawl-gone", 1, "recrawl: pages not found at all")
	fs.IntVar(&re.Added, "recrawl-added", 1, "recrawl: pages the earlier job did not have")
	fs.StringVar(&o.ID, "crawl-id", "", "job id (default: a random UUID)")
	fs.StringVar(&o.Kind, "kind", events.KindCrawl, "job kind: crawl (crawl.* events, /v2/crawl/{id}) or batch_scrape (batch_scrape.* events, /v2/batch/scrape/{id})")
	fs.IntVar(&o.RobotsBlocked, "robots-blocked", 0, "URLs robots.txt blocks: listed by the errors endpoint's robotsBlocked, never delivered")
	fs.IntVar(&o.Pages, "pages", 100, "pages in the crawl")
	fs.IntVar(&o.PageBytes, "page-bytes", 2048, "markdown size of a page")
	fs.BoolVar(&o.HTML, "html", false, "put each page's html in its Document: its text and a link to every page the job finds")
	fs.StringVar(&o.Site, "site", "https://example.com", "origin of the page URLs")
	fs.Func("metadata", `the webhook's custom metadata, a JSON object echoed in every delivery (default {"tenant":"crawlsim"}); e.g. {"scope":"docs","limit":"100"} names the job's scope for change tracking (values are strings, as the crawl API takes them)`, func(v string) error {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(v), &obj); err != nil || obj == nil {
			return errors.New("not a JSON object")
		}
		o.Metadata = json.RawMessage(v)
		return nil
	})
	fs.Float64Var(&o.Faults.Duplicates, "duplicates", 0, "fraction of pages delivered twice")
	fs.Float64Var(&o.Faults.Drops, "drops", 0, "fraction of pages never delivered (backfill only)")
	fs.Float64Var(&o.Faults.Failures, "failures", 0, "fraction of pages that fail to scrape")
	fs.Float64Var(&o.Faults.DroppedFailures, "dropped-failures", 0, "fraction of pages that fail to scrape and whose delivery is never sent (errors endpoint only)")
	fs.Float64Var(&o.Faults.BadSignatures, "bad-signatures", 0, "fraction of deliveries signed with a wrong secret")
	fs.Float64Var(&o.Faults.Oversized, "oversized", 0, "fraction of pages with -oversize-bytes of markdown")
	fs.IntVar(&o.Faults.OversizeBytes, "oversize-bytes", 3<<20, "markdown size of an oversized page")
	fs.StringVar(&snd.Target, "target", "", "URL the deliveries are POSTed to; empty: send nothing, serve the crawl as completed")
	fs.StringVar(&snd.Secret, "secret", getenv("WEBHOOK_SECRET"), "HMAC secret (env WEBHOOK_SECRET); empty: unsigned")
	fs.StringVar(&snd.SignatureHeader, "signature-header", "X-Service-Signature", "signature header name")
	fs.Float64Var(&snd.Rate, "rate", 0, "deliveries per second (0: as fast as concurrency allows)")
	fs.IntVar(&snd.Concurrency, "concurrency", 8, "POSTs in flight")
	fs.DurationVar(&snd.Timeout, "timeout", 10*time.Second, "answer timeout of a delivery")
	fs.StringVar(&api.Key, "api-key", getenv("CRAWL_API_KEY"), "bearer key of the status API (env CRAWL_API_KEY); empty: any")
	fs.IntVar(&api.PageDocs, "chunk-docs", 100, "most documents per status page")
	fs.IntVar(&api.PageBytes, "chunk-bytes", 10<<20, "most bytes of documents per status page")
	fs.IntVar(&api.NotFoundReads, "not-found-reads", 0, "answer 404 to the first N status reads of the crawl")
	fs.IntVar(&api.ThrottleReads, "throttle-reads", 0, "answer 429 to the next N status reads of the crawl")
	fs.IntVar(&api.ThrottleEvery, "throttle-every", 0, "answer 429 to every Nth status request")
	fs.DurationVar(&api.RetryAfter, "retry-after", time.Second, `wait named in a 429's "retry after Ns"`)
	fs.StringVar(&api.NextBase, "next-base", "", "scheme://host put in next links (default: the request's host)")
	fs.BoolVar(&api.NoErrorsEndpoint, "no-errors-endpoint", false, "serve no GET .../{id}/errors (404), as an API without it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return env.Usage(err)
	}
	if fs.NArg() > 0 {
		return env.Usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	o.Seed = *seed
	if re.Of != "" {
		o.Recrawl = &re
	}
	if *cancel >= 0 {
		o.Cancel, o.CancelAfter = true, *cancel
	}
	delays, err := parseDelays(*retries)
	if err != nil {
		return err
	}
	snd.RetryDelays = delays

	if *batch < 0 {
		return fmt.Errorf("-batch-pages: %d is negative", *batch)
	}
	crawl, err := NewCrawl(o)
	if err != nil {
		return err
	}
	jobs := []*Crawl{crawl}
	if *batch > 0 {
		// A batch scrape beside the job, as a user of the API runs both
		// with one webhook: its own id and URLs, the same faults.
		bo := o
		bo.ID, bo.Kind, bo.Pages, bo.Cancel = "", events.KindBatchScrape, *batch, false
		bo.Site = strings.TrimSuffix(o.Site, "/") + "/batch"
		if o.Seed != 0 {
			bo.Seed = o.Seed + 1
		}
		b, err := NewCrawl(bo)
		if err != nil {
			return fmt.Errorf("batch scrape: %w", err)
		}
		jobs = append(jobs, b)
	}
	a := NewAPI(api)
	for _, j := range jobs {
		a.Add(j)
	}
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	if *listen != "" {
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("status API: %w", err)
		}
		go srv.Serve(ln)
		defer srv.Close()
		for _, j := range jobs {
			fmt.Fprintf(stdout, "status API: http://%s%s\n", ln.Addr(), j.StatusPath())
		}
	}

	for i, j := range jobs {
		if snd.Target == "" {
			j.Finish(j.FinalStatus())
			continue
		}
		sender, err := NewSender(snd)
		if err != nil {
			return err
		}
		report := sender.Send(ctx, j)
		if err := report.WriteSummary(stdout); err != nil {
			return err
		}
		if *manifest != "" {
			path := *manifest
			if i > 0 {
				// manifest.json, then manifest-batch_scrape.json.
				path = strings.TrimSuffix(path, ".json") + "-" + j.Kind + ".json"
			}
			if err := report.WriteManifest(path); err != nil {
				return fmt.Errorf("manifest: %w", err)
			}
			fmt.Fprintf(stdout, "manifest: %s\n", path)
		}
	}
	if *exit || *listen == "" {
		return nil
	}
	<-ctx.Done()
	return nil
}

func parseDelays(s string) ([]time.Duration, error) {
	out := []time.Duration{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("-retry-delays: %q is not a duration", f)
		}
		out = append(out, d)
	}
	return out, nil
}
