package sim

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// traceProp reads the caller's traceparent; the emulator never starts spans.
var traceProp = propagation.TraceContext{}

// route wraps a verb's handler with what every request gets: the verb
// counter, the trace id, fault injection and one log line. It never logs a
// header, so the bearer token cannot reach the log.
func (s *Server) route(verb string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s.counters.inc(verb)
		// The log line is all that needs the recorder, the note and (but for
		// claims) the trace id: with logging off, none of it is built.
		logging := s.log.Enabled(r.Context(), slog.LevelInfo)
		var sc trace.SpanContext
		if verb == pool.VerbClaim || logging {
			sc = trace.SpanContextFromContext(traceProp.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		if verb == pool.VerbClaim && sc.HasTraceID() {
			s.traces.add(sc.TraceID().String())
		}
		if !logging {
			s.serve(verb, w, r, h)
			return
		}
		note := &reqNote{}
		r = r.WithContext(context.WithValue(r.Context(), noteKey{}, note))
		rec := &statusRecorder{ResponseWriter: w}
		fault := s.serve(verb, rec, r, h)
		attrs := append([]slog.Attr{
			slog.String("verb", verb), slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", rec.status), slog.Duration("dur", time.Since(start)), slog.String("fault", fault),
		}, note.attrs...)
		if sc.HasTraceID() {
			attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
		}
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
	})
}

// serve answers r with h, or with the next fault injected for verb, and
// returns the fault's mode ("-" for none).
func (s *Server) serve(verb string, w http.ResponseWriter, r *http.Request, h http.HandlerFunc) string {
	if f, ok := s.faults.take(verb); ok {
		s.applyFault(f, w, r, h)
		return f.Mode
	}
	h(w, r)
	return "-"
}

// reqNote lets a handler add fields (claim id, claim_ref) to the request's
// single log line.
type reqNote struct{ attrs []slog.Attr }

type noteKey struct{}

func annotate(r *http.Request, attrs ...slog.Attr) {
	if n, ok := r.Context().Value(noteKey{}).(*reqNote); ok {
		n.attrs = append(n.attrs, attrs...)
	}
}

// statusRecorder keeps the status for the log line. A hijacked (reset)
// response logs status 0.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// httpError is an error answer: {"error": msg} with status, and Retry-After
// when retryAfter is set, which only a 503 does.
type httpError struct {
	status     int
	msg        string
	retryAfter time.Duration
}

func errNotFound(id string) *httpError {
	return &httpError{status: http.StatusNotFound, msg: "unknown sandbox " + id}
}

func errBadBody() *httpError {
	return &httpError{status: http.StatusBadRequest, msg: "invalid request body"}
}

func writeFailure(w http.ResponseWriter, e *httpError) {
	if e.retryAfter > 0 {
		setRetryAfter(w, e.retryAfter)
	}
	writeError(w, e.status, e.msg)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, pool.ErrorBody{Error: msg})
}

// setRetryAfter sends d in whole seconds, rounded up.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	secs := int64((d + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
}

// sleepCtx sleeps d or until ctx ends; false means ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sleepUnlessStopped sleeps d, ignoring the caller, but not past Close: a
// claim that outlives its caller must not hold up the node's shutdown.
func (s *Server) sleepUnlessStopped(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.stop:
	}
}
