package sim

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// traceProp reads the caller's traceparent.
var traceProp = propagation.TraceContext{}

// tracerName is the instrumentation scope of the emulator's server spans.
const tracerName = "github.com/cocoonstack/vk-sandbox/pool/sim"

// route wraps a verb's handler with what every request gets: the verb
// counter, the trace id, fault injection, a server span (with
// Config.TracerProvider) and one log line. It never logs a header, so the
// bearer token cannot reach the log or a span.
func (s *Server) route(verb string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s.counters.inc(verb)
		// The log line and the span are all that need the recorder, the note
		// and (but for claims) the trace id: with both off, none of it is
		// built.
		logging := s.log.Enabled(r.Context(), slog.LevelInfo)
		tracing := s.tracer != nil
		var sc trace.SpanContext
		if verb == pool.VerbClaim || logging || tracing {
			ctx := traceProp.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			sc = trace.SpanContextFromContext(ctx)
			if tracing {
				r = r.WithContext(ctx)
			}
		}
		if verb == pool.VerbClaim && sc.HasTraceID() {
			s.traces.add(sc.TraceID().String())
		}
		if !logging && !tracing {
			s.serve(verb, w, r, h)
			return
		}
		note := &reqNote{}
		rec := &statusRecorder{ResponseWriter: w}
		fault := "-"
		if tracing {
			ctx, span := s.tracer.Start(r.Context(), r.Pattern, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithTimestamp(start), trace.WithAttributes(
					attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
					attribute.String("http.route", routeOf(r.Pattern)), attribute.String("sandboxd.verb", verb)))
			r = r.WithContext(ctx)
			// Deferred, so that a handler aborted with http.ErrAbortHandler
			// (a "reset" fault without hijack) still ends its span.
			defer func() { endServerSpan(span, rec.status, fault, note.attrs) }()
		}
		r = r.WithContext(context.WithValue(r.Context(), noteKey{}, note))
		fault = s.serve(verb, rec, r, h)
		if !logging {
			return
		}
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

// endServerSpan sets what the request ended with and ends the span: the
// status (0 for a connection the emulator broke), the injected fault, and
// the handler's notes (claim id, claim_ref, ...) as sandboxd.* attributes.
// As for an HTTP server span, a 5xx or a broken connection is an error and
// a 4xx is the caller's.
func endServerSpan(span trace.Span, status int, fault string, notes []slog.Attr) {
	attrs := make([]attribute.KeyValue, 0, 2+len(notes))
	attrs = append(attrs, attribute.Int("http.response.status_code", status))
	if fault != "-" {
		attrs = append(attrs, attribute.String("sandboxd_sim.fault", fault))
	}
	for _, a := range notes {
		attrs = append(attrs, spanAttr("sandboxd."+a.Key, a.Value))
	}
	span.SetAttributes(attrs...)
	switch {
	case status == 0:
		span.SetStatus(codes.Error, "connection broken")
	case status >= 500:
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

func spanAttr(key string, v slog.Value) attribute.KeyValue {
	switch v.Kind() {
	case slog.KindBool:
		return attribute.Bool(key, v.Bool())
	case slog.KindInt64:
		return attribute.Int64(key, v.Int64())
	default:
		return attribute.String(key, v.String())
	}
}

// routeOf is the path part of a ServeMux pattern ("POST /v1/claim").
func routeOf(pattern string) string {
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return path
	}
	return pattern
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
