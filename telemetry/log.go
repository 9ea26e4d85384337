package telemetry

import (
	"context"
	"io"
	"log/slog"
	"strconv"

	"go.opentelemetry.io/otel/trace"
)

// NewLogger returns a slog.Logger writing to w at level, as JSON when json
// is set and logfmt-style text otherwise. Every record logged with a ctx
// that carries a span (sampled or not) gains trace_id and span_id, so the
// log lines of one claim can be found from its trace and vice versa. Use
// the *Context logging methods (InfoContext, ...) for that to work.
func NewLogger(w io.Writer, level slog.Level, json bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}
	var h slog.Handler
	if json {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(TraceHandler(h))
}

// durationText writes a time.Duration as Go writes it ("1.5s"), in JSON
// as in text: slog's JSON handler would write integer nanoseconds, which
// a reader has to divide in their head.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// TraceHandler wraps h so records gain trace_id and span_id from the span
// in the ctx they are logged with. Under a WithGroup the two attributes
// land inside the group, as any attribute added at Handle time must.
func TraceHandler(h slog.Handler) slog.Handler { return traceHandler{h} }

type traceHandler struct{ inner slog.Handler }

func (h traceHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	// Validity, not sampling, is the test: with tracing off spans are
	// unsampled yet still worth correlating by id.
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(
			slog.String("trace_id", sc.TraceID().String()),
			slog.String("span_id", sc.SpanID().String()),
		)
	}
	return h.inner.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.inner.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.inner.WithGroup(name)}
}

// Redact stands in for a secret (a sandboxd release token, a bearer token)
// wherever one could otherwise reach a log line, span attribute or error:
// it keeps only the length, which is enough to tell "empty" from "set".
func Redact(s string) string {
	return "<redacted len=" + strconv.Itoa(len(s)) + ">"
}
