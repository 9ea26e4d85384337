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
	if ready == nil {
		return t.HandlerWithDetail(nil)
	}
	return t.HandlerWithDetail(func() (string, error) { return "", ready() })
}

// HandlerWithDetail is Handler whose readiness also reports a detail: one
// line per check. /readyz answers 503 with the detail and the error when
// not ready, and "ok" when ready; /readyz?verbose adds the detail to "ok",
// as kube-apiserver's /readyz?verbose lists its checks.
func (t *Telemetry) HandlerWithDetail(ready func() (detail string, err error)) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		// A failing collector should cost its own series, not the scrape.
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ready == nil {
			writeText(w, http.StatusOK, "ok")
			return
		}
		detail, err := ready()
		switch {
		case err != nil:
			writeText(w, http.StatusServiceUnavailable, detail+err.Error())
		case r.URL.Query().Has("verbose"):
			writeText(w, http.StatusOK, detail+"ok")
		default:
			writeText(w, http.StatusOK, "ok")
		}
	})
	return mux
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body + "\n"))
}
