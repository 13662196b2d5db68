package ops

import (
	"context"
	"net/http"
	"time"
)

// Readiness checks what a binary needs to make progress: each dependency
// by name (jetstream, clickhouse…) and its error, nil when it is fine.
type Readiness func(ctx context.Context) map[string]error

// Status values of the /healthz and /readyz bodies.
const (
	StatusOK          = "ok"
	StatusReady       = "ready"
	StatusUnavailable = "unavailable"
)

// ReadyBody is the /readyz answer of every binary: status is "ready"
// (200) when every check passes, "unavailable" (503) otherwise, and checks
// holds each check's state, "ok" or the reason it fails.
type ReadyBody struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// Handler serves a binary's operational endpoints: GET /healthz (200
// {"status":"ok"} while the process serves), GET /readyz (ReadyBody; ready
// is given timeout to answer) and GET /metrics (metrics, see NewRegistry).
// Any other request is not its: 404.
func Handler(metrics http.Handler, ready Readiness, timeout time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_ = WriteJSON(w, http.StatusOK, map[string]string{"status": StatusOK})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		code, body := Check(ctx, ready)
		_ = WriteJSON(w, code, body)
	})
	mux.Handle("GET /metrics", metrics)
	return mux
}

// Check runs ready and returns the /readyz status code and body.
func Check(ctx context.Context, ready Readiness) (int, ReadyBody) {
	body := ReadyBody{Status: StatusReady, Checks: map[string]string{}}
	code := http.StatusOK
	for dep, err := range ready(ctx) {
		if err != nil {
			body.Checks[dep] = err.Error()
			body.Status = StatusUnavailable
			code = http.StatusServiceUnavailable
		} else {
			body.Checks[dep] = StatusOK
		}
	}
	return code, body
}
