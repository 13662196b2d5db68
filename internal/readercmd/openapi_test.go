package readercmd_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// TestOpenAPI checks the OpenAPI document the running reader serves
// against the reader itself: every route is documented with exactly the
// query parameters it takes, and every documented operation, called with
// sample values, answers a documented status whose JSON body matches the
// documented schema (and so does an error answer).
func TestOpenAPI(t *testing.T) {
	t.Parallel()
	s := seed(t)
	base := startReader(t, s.cfg, nil)
	var doc map[string]any
	getJSON(t, base+"/openapi.json", http.StatusOK, &doc)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v", doc["openapi"])
	}
	paths := doc["paths"].(map[string]any)

	api, err := reader.New(reader.Config{OpenAccess: true, QueryMaxTime: time.Second, ExportMaxTime: time.Second, RequestMaxTime: time.Second, QueryMaxRows: 1000, QueryMaxMemory: 1 << 30,
		QueryThreads: 1, QueryConcurrency: 1, SearchCandidates: 1000, SearchMaxTime: time.Second, MaxInflight: 1, MaxExports: 1},
		reader.Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	for route, params := range api.Routes() {
		path := regexp.MustCompile(`:(\w+)`).ReplaceAllString(route, "{$1}")
		op, ok := paths[path].(map[string]any)["get"].(map[string]any)
		if !ok {
			t.Errorf("%s is served but not documented", path)
			continue
		}
		var documented []string
		for _, p := range parameters(op) {
			if p := p.(map[string]any); p["in"] == "query" {
				documented = append(documented, p["name"].(string))
			}
		}
		slices.Sort(documented)
		slices.Sort(params)
		if !slices.Equal(documented, params) {
			t.Errorf("%s takes %v, documented %v", path, params, documented)
		}
	}

	samples := map[string]string{"id": s.jobA, "url": "https://r.example/0", "q": "alpha", "job": s.jobA, "format": "json"}
	for path, item := range paths {
		op := item.(map[string]any)["get"].(map[string]any)
		u := path
		q := url.Values{}
		for _, p := range parameters(op) {
			p := p.(map[string]any)
			name := p["name"].(string)
			switch {
			case p["in"] == "path":
				u = strings.ReplaceAll(u, "{"+name+"}", samples[name])
			case p["required"] == true || (samples[name] != "" && name != "job"):
				q.Set(name, samples[name])
			}
		}
		if path == "/v1/jobs/{id}/export" {
			q.Del("format")
		}
		checkAnswer(t, doc, op, base+u+"?"+q.Encode())
		// A parameter that cannot be used: a documented 400 with its name.
		if len(parameters(op)) > 0 && path != "/openapi.json" {
			q.Set("limit", "-1")
			q.Set("unknown", "1")
			checkAnswer(t, doc, op, base+u+"?"+q.Encode())
		}
	}
}

// checkAnswer GETs u and checks the answer against op's responses.
func checkAnswer(t *testing.T, doc, op map[string]any, u string) {
	t.Helper()
	resp, body := get(t, u, testToken)
	responses := op["responses"].(map[string]any)
	r, ok := responses[fmt.Sprint(resp.StatusCode)].(map[string]any)
	if !ok {
		t.Errorf("GET %s: status %d is not documented: %s", u, resp.StatusCode, body)
		return
	}
	r = resolve(doc, r)
	ctype, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	content, _ := r["content"].(map[string]any)
	media, ok := content[ctype].(map[string]any)
	if !ok {
		t.Errorf("GET %s: Content-Type %s is not documented for %d", u, ctype, resp.StatusCode)
		return
	}
	if ctype != "application/json" {
		return
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("GET %s: %v", u, err)
		return
	}
	if err := validate(doc, media["schema"].(map[string]any), v, "body"); err != nil {
		t.Errorf("GET %s: %v\n%s", u, err, body)
	}
}

func resolve(doc, node map[string]any) map[string]any {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node
	}
	cur := any(doc)
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		cur = cur.(map[string]any)[part]
	}
	return resolve(doc, cur.(map[string]any))
}

// validate checks v against the JSON Schema subset the document uses:
// $ref, allOf, type (one or a list), enum, properties, required, items,
// and the formats date-time and uuid. Properties not described are
// refused: the document must name every field.
func validate(doc, schema map[string]any, v any, at string) error {
	schema = resolve(doc, schema)
	if all, ok := schema["allOf"].([]any); ok {
		merged := map[string]any{"type": "object", "properties": map[string]any{}, "required": []any{}}
		for _, s := range all {
			s := resolve(doc, s.(map[string]any))
			for k, p := range s["properties"].(map[string]any) {
				merged["properties"].(map[string]any)[k] = p
			}
			if req, ok := s["required"].([]any); ok {
				merged["required"] = append(merged["required"].([]any), req...)
			}
		}
		schema = merged
	}
	types := []string{}
	switch ty := schema["type"].(type) {
	case string:
		types = append(types, ty)
	case []any:
		for _, x := range ty {
			types = append(types, x.(string))
		}
	}
	kind := jsonKind(v)
	if len(types) > 0 && !slices.Contains(types, kind) && !(kind == "integer" && slices.Contains(types, "number")) {
		return fmt.Errorf("%s: a %s, documented %v", at, kind, types)
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.Contains(enum, v) {
		return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
	}
	switch v := v.(type) {
	case string:
		switch schema["format"] {
		case "date-time":
			if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
				return fmt.Errorf("%s: %q is not a date-time", at, v)
			}
		case "uuid":
			if _, err := uuid.Parse(v); err != nil {
				return fmt.Errorf("%s: %q is not a uuid", at, v)
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, x := range v {
				if err := validate(doc, items, x, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		if req, ok := schema["required"].([]any); ok {
			for _, name := range req {
				if _, ok := v[name.(string)]; !ok {
					return fmt.Errorf("%s: required %s missing", at, name)
				}
			}
		}
		for name, x := range v {
			p, ok := props[name].(map[string]any)
			if !ok {
				if props != nil {
					return fmt.Errorf("%s.%s is not documented", at, name)
				}
				continue
			}
			if err := validate(doc, p, x, at+"."+name); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	}
	return "object"
}

func parameters(op map[string]any) []any {
	p, _ := op["parameters"].([]any)
	return p
}
