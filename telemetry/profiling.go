package telemetry

import (
	"net/http"
	"net/http/pprof"
)

// WithProfiling adds Go's runtime profiles (/debug/pprof/) to h, the
// operational handler. Off by default: a profile shows code paths and
// goroutine stacks (never memory contents), so it is served only where the
// operator asked for it, on the metrics listener.
func WithProfiling(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}
