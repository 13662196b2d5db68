package sinkcmd

import (
	"context"
	"net/http"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/ops"
)

// readiness checks what the sink needs to make progress: each dependency
// and its error, nil when it is fine.
type readiness func(ctx context.Context) map[string]error

// routes are the sink's operational endpoints: /healthz (the process
// answers), /readyz (200 only when every readiness check passes, 503 with
// each failing check's reason otherwise), /metrics.
func routes(metrics http.Handler, ready readiness) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_ = ops.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		body := map[string]string{"status": "ready"}
		code := http.StatusOK
		for dep, err := range ready(ctx) {
			if err != nil {
				body[dep] = err.Error()
				body["status"] = "unavailable"
				code = http.StatusServiceUnavailable
			} else {
				body[dep] = "ok"
			}
		}
		_ = ops.WriteJSON(w, code, body)
	})
	mux.Handle("GET /metrics", metrics)
	return mux
}
