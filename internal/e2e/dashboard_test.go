package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
)

// Files whose PromQL must name only metrics the binaries export.
var (
	dashboardFile      = filepath.Join("..", "..", "charts", "crawlhouse", "dashboards", "crawlhouse.json")
	prometheusRuleFile = filepath.Join("..", "..", "charts", "crawlhouse", "templates", "prometheusrule.yaml")
)

// notOurs are the series the dashboard and the alerts may use that no
// crawlhouse binary exports, each for a reason.
var notOurs = map[string]string{
	"up":                             "Prometheus's own per-target series",
	"ALERTS":                         "Prometheus's series of firing alerts",
	"jetstream_consumer_num_pending": "the NATS exporter's, used only with consumerLagFromNatsExporter",
}

// TestDashboardMetricsExported keeps the dashboard and the PrometheusRule
// from drifting away from the code: it starts a real receiver, a real sink
// (embedded JetStream, the shared ClickHouse, backfill on) and a real
// reader, archives a crawl and reads it back (a search, an export) so that
// every labelled series exists, scrapes
// their /metrics, extracts every PromQL expression of the dashboard (panel
// targets and variable queries) and of the alerts, and fails for every
// metric name neither binary exports — a renamed or removed metric, or a
// typo, instead of an empty panel or an alert that can never fire.
func TestDashboardMetricsExported(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, "")
	webhook := p.startReceiver(t, nil)
	s := p.startSink(t, env{"CRAWL_API_URL": "http://127.0.0.1:9/", "CRAWL_API_KEY": "unused"})

	receiverMetrics := strings.TrimSuffix(webhook, "/webhooks/crawl") + "/metrics"
	sinkMetrics := "http://" + s.addr + "/metrics"
	// The sink registers its alert and lag metrics once its start-up is
	// through; wait for the last of them.
	var sinkText string
	waitFor(t, 2*time.Minute, "the sink's start-up", func() bool {
		sinkText = scrapeText(t, sinkMetrics)
		return strings.Contains(sinkText, "\ncrawlhouse_sink_lag_seconds ") && strings.Contains(sinkText, "\ncrawlhouse_alerts_total ")
	})
	exported := exportedNames(sinkText)
	for n := range exportedNames(scrapeText(t, receiverMetrics)) {
		exported[n] = true
	}
	for n := range readerMetricNames(t, p, webhook) {
		exported[n] = true
	}

	exprs := dashboardExprs(t)
	rules := ruleExprs(t)
	if len(exprs) < 20 || len(rules) < 10 {
		t.Fatalf("found %d dashboard and %d alert expressions: the extraction is broken", len(exprs), len(rules))
	}
	for where, list := range map[string][]string{dashboardFile: exprs, prometheusRuleFile: rules} {
		for _, e := range list {
			names := metricNames(e)
			if len(names) == 0 {
				t.Errorf("%s: no metric in %q", where, e)
			}
			for _, n := range names {
				if _, ok := notOurs[n]; ok {
					continue
				}
				if !exported[n] {
					t.Errorf("%s names %s, which no binary exports (in %q)", where, n, e)
				}
			}
		}
	}
}

// TestMetricNames checks the PromQL tokenizer on the constructs the
// dashboard and the alerts use: functions, aggregations with by/without,
// vector matching, label matchers with PromQL-looking strings, ranges,
// offsets, numbers, Grafana variables and label_values queries.
func TestMetricNames(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string][]string{
		`sum by (outcome) (rate(a_total{job=~"$receiver",outcome="x or y"}[$__rate_interval]))`:               {"a_total"},
		`histogram_quantile(0.99, sum by (le) (rate(b_seconds_bucket{job=~"${sink}"}[5m])))`:                  {"b_seconds_bucket"},
		`sum(rate(c[5m])) / on (job) group_left (instance) d offset 1h > bool 0.5 and e unless f or g{a="b"}`: {"c", "d", "e", "f", "g"},
		`max without (pod) (h) == 0 and absent(up{job="x"} == 1)`:                                             {"h", "up"},
		`sum(x) by (job) + count by (job) (y)`:                                                                {"x", "y"},
		`clamp_min(sum(rate(i[5m])), 1e-9) * 100 > Inf`:                                                       {"i"},
		`label_values(j_total, job)`:                                                                          {"j_total"},
		`k:recorded:rate5m > 1`:                                                                               {"k:recorded:rate5m"},
		`'single' + "double" + ` + "`raw`":                                                                    nil,
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

func scrapeText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// exportedNames are the sample names of an exposition (histograms' with
// their _bucket, _sum and _count suffixes, as PromQL names them).
func exportedNames(exposition string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.SplitSeq(exposition, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// dashboardExprs are the PromQL expressions of the dashboard: every "expr"
// of a panel target (nested rows included) and every variable query.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "expr" && s != "" {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash["panels"])
	templating, _ := dash["templating"].(map[string]any)
	vars, _ := templating["list"].([]any)
	for _, v := range vars {
		v, _ := v.(map[string]any)
		if v["type"] != "query" {
			continue
		}
		switch q := v["query"].(type) {
		case string:
			out = append(out, q)
		case map[string]any:
			if s, ok := q["query"].(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// ruleExprs are the alerts' expressions as the chart's template writes
// them, with the template actions taken out (they only fill in label
// matchers and thresholds; one adds the NATS exporter's series, see
// notOurs). Reading the template spares this module Helm.
func ruleExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(prometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	actions := regexp.MustCompile(`\{\{-?.*?-?\}\}`)
	lines := strings.Split(string(b), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		key, value, ok := strings.Cut(strings.TrimSpace(lines[i]), "expr:")
		if !ok || key != "" {
			continue
		}
		value = strings.TrimSpace(value)
		if value == "|" || value == ">" {
			// A block: the lines indented deeper than the key.
			indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
			var block []string
			for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) > indent) {
				i++
				block = append(block, lines[i])
			}
			value = strings.Join(block, "\n")
		}
		out = append(out, actions.ReplaceAllString(value, "1"))
	}
	return out
}

// promqlKeywords are identifiers PromQL reads as operators or modifiers,
// never as metric names.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true,
	"ignoring": true, "group_left": true, "group_right": true, "bool": true, "offset": true,
	"inf": true, "nan": true, "atan2": true,
}

// aggregations are PromQL's aggregation operators: a function even when
// by (…) or without (…) comes between the name and its parenthesis.
var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

// labelLists are the keywords followed by a parenthesised list of labels.
var labelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// metricNames returns the metric names an expression selects, in order of
// appearance and without repeats. A small PromQL tokenizer, enough for
// names: it skips strings, label matchers ({…}), ranges and subqueries
// ([…]), numbers and durations, Grafana variables ($x, ${x}), function
// calls (an identifier before "(") and the labels listed after by, without,
// on, ignoring, group_left and group_right. A Grafana label_values(metric,
// label) query yields its metric only.
func metricNames(expr string) []string {
	if rest, ok := strings.CutPrefix(strings.TrimSpace(expr), "label_values("); ok {
		if i := strings.LastIndex(rest, ","); i >= 0 {
			expr = rest[:i]
		} else {
			expr = strings.TrimSuffix(rest, ")")
		}
	}
	var names []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	skipTo := func(i int, open, close byte) int {
		depth := 0
		for ; i < len(expr); i++ {
			switch c := expr[i]; {
			case c == '"' || c == '\'' || c == '`':
				i = skipString(expr, i)
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return i
				}
			}
		}
		return i
	}
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{':
			i = skipTo(i, '{', '}')
		case c == '[':
			i = skipTo(i, '[', ']')
		case c == '$':
			if i+1 < len(expr) && expr[i+1] == '{' {
				i = skipTo(i+1, '{', '}')
				continue
			}
			for i+1 < len(expr) && isPart(expr[i+1]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number (1e-9, 0x1f) or a duration (5m): digits, letters, dots, signs of exponents.
			for i+1 < len(expr) && (isPart(expr[i+1]) || expr[i+1] == '.' ||
				(expr[i+1] == '-' || expr[i+1] == '+') && (expr[i] == 'e' || expr[i] == 'E')) {
				i++
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && (expr[k] == ' ' || expr[k] == '\n' || expr[k] == '\t') {
				k++
			}
			next := byte(0)
			if k < len(expr) {
				next = expr[k]
			}
			lower := strings.ToLower(word)
			switch {
			case labelLists[lower] && next == '(':
				i = skipTo(k, '(', ')')
				continue
			case promqlKeywords[lower], next == '(', aggregations[lower]:
				// An operator, or a function or aggregation.
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
			i = j - 1
		}
	}
	return names
}

// skipString returns the index of the quote that closes the string opened
// at expr[i] (backslash escapes in "…" and '…', none in `…`).
func skipString(expr string, i int) int {
	q := expr[i]
	for j := i + 1; j < len(expr); j++ {
		if expr[j] == '\\' && q != '`' {
			j++
			continue
		}
		if expr[j] == q {
			return j
		}
	}
	return len(expr)
}

// readerMetricNames starts a reader on p's archive, sends a crawl through
// the receiver at webhook, reads it back through the reader (a search, an
// export) and returns the metric names its /metrics
// then exports: a labelled series exists only once observed.
func readerMetricNames(t *testing.T, p *pipeline, webhook string) map[string]bool {
	t.Helper()
	crawl, err := crawlsim.NewCrawl(crawlsim.Options{Pages: 3, PageBytes: 400, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	send(t, webhook, crawl)
	waitFor(t, time.Minute, "the crawl archived", func() bool {
		pages, err := p.tryPagesOf(crawl.ID)
		return err == nil && len(pages) == 3
	})
	base := p.startReader(t, io.Discard)
	if code, body := readerGet(t, base+"/v1/search?q=example"); code != http.StatusOK {
		t.Fatalf("search: %d %s", code, body)
	}
	if code, body := readerGet(t, base+"/v1/jobs/"+crawl.ID+"/export?format=ndjson"); code != http.StatusOK {
		t.Fatalf("export: %d %s", code, body)
	}
	text := scrapeText(t, base+"/metrics")
	if !strings.Contains(text, "crawlhouse_reader_export_bytes_total{") {
		t.Fatalf("the reader's /metrics has no export bytes after an export:\n%s", text)
	}
	return exportedNames(text)
}
