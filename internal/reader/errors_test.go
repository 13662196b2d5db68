package reader_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/testkit/archivetest"
	"github.com/rs/zerolog"
)

// TestOneAnswerPerCondition: each condition a read can end in is answered
// with one status, code and Retry-After (docs/read-api.md, "Errors"),
// whether the API answers it (JSON) or the web pages do (a page); an
// internal error's text reaches neither.
func TestOneAnswerPerCondition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter string
		param      string
	}{
		{"a parameter the archive refuses", &query.ParamError{Param: "cursor", Reason: "altered"}, 400, "invalid_parameter", "", "cursor"},
		{"nothing of the job", fmt.Errorf("crawl x: %w", archive.ErrNoCrawl), 404, "not_found", "", ""},
		{"no version of the URL", query.ErrNoPage, 404, "not_found", "", ""},
		{"a query past its limits", fmt.Errorf("search: %w (memory)", query.ErrLimit), 422, "query_limit", "", ""},
		{"every read slot taken", query.ErrBusy, 429, "overloaded", "1", ""},
		{"ClickHouse out of reach", errors.New("dial tcp 10.0.0.7:9000: connect: connection refused secret-host"), 503, "unavailable", "5", ""},
		{"ClickHouse read-only", &clickhouse.Exception{Code: 164, Message: "readonly secret-host"}, 503, "unavailable", "5", ""},
		{"a query ClickHouse refuses", &clickhouse.Exception{Code: 62, Message: "Syntax error secret-host"}, 500, "internal", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startReader(t, config(), &archivetest.Archive{Hold: func(context.Context, string) error { return tc.err }})
			api := get(t, srv, "/v1/search?q=kettle")
			var body reader.ErrorBody
			if err := json.Unmarshal(api.body, &body); err != nil || !strings.HasPrefix(api.header.Get("Content-Type"), "application/json") {
				t.Fatalf("API: %s %q: %v", api.header.Get("Content-Type"), api.body, err)
			}
			if api.status != tc.status || body.Error != tc.code || body.Parameter != tc.param || api.header.Get("Retry-After") != tc.retryAfter {
				t.Errorf("API: %d %+v Retry-After %q; want %d %s parameter %q Retry-After %q",
					api.status, body, api.header.Get("Retry-After"), tc.status, tc.code, tc.param, tc.retryAfter)
			}
			page := get(t, srv, "/ui/search?q=kettle")
			if page.status != tc.status || page.header.Get("Retry-After") != tc.retryAfter || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
				!strings.Contains(string(page.body), fmt.Sprintf("<h1>%d</h1>", tc.status)) {
				t.Errorf("page: %d %s Retry-After %q; want %d Retry-After %q, a page\n%s",
					page.status, page.header.Get("Content-Type"), page.header.Get("Retry-After"), tc.status, tc.retryAfter, page.body)
			}
			if tc.param != "" && (!strings.Contains(body.Message, "parameter "+tc.param) || !strings.Contains(string(page.body), "parameter "+tc.param)) {
				t.Errorf("the parameter is not named: API %q, page\n%s", body.Message, page.body)
			}
			for _, a := range []answer{api, page} {
				if strings.Contains(string(a.body), "secret-host") {
					t.Errorf("the internal error reached the client:\n%s", a.body)
				}
			}
		})
	}
}

// OutcomeOf a request whose client left is 499, logged by nobody, and of
// one past its deadline 504, whatever error the archive gave.
func TestOutcomeOfAContextDone(t *testing.T) {
	t.Parallel()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	late, cancelLate := context.WithTimeout(context.Background(), 0)
	defer cancelLate()
	<-late.Done()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		status int
		code   string
		log    zerolog.Level
	}{
		{"client gone", gone, reader.StatusClientClosed, "client_closed", zerolog.Disabled},
		{"past the deadline", late, http.StatusGatewayTimeout, "timeout", zerolog.WarnLevel},
	} {
		o := reader.OutcomeOf(tc.ctx, fmt.Errorf("search: %w", tc.ctx.Err()))
		if o.Status != tc.status || o.Code != tc.code || o.Log != tc.log {
			t.Errorf("%s: %+v, want %d %s logged at %v", tc.name, o, tc.status, tc.code, tc.log)
		}
	}
}
