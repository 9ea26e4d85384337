package telemetry

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the node agent's operational endpoints:
//
//   - /metrics: the dedicated Registry. OpenMetrics is offered so a scraper
//     that asks for it (Accept: application/openmetrics-text) gets the
//     exemplars; the classic text format cannot carry them.
//   - /healthz: 200 "ok" while the process can serve HTTP at all. It does
//     not consult ready: a liveness probe that fails on a sandboxd outage
//     would restart the agent and drop in-memory state for nothing.
//   - /readyz: 200 "ok" when ready returns nil (or ready is nil), else 503
//     with the error text.
func (t *Telemetry) Handler(ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		// A failing collector should cost its own series, not the scrape.
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				writeText(w, http.StatusServiceUnavailable, err.Error())
				return
			}
		}
		writeText(w, http.StatusOK, "ok")
	})
	return mux
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body + "\n"))
}
