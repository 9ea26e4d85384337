package telemetry

import (
	"context"
	"fmt"
	"sync"
	"time"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vktrace "github.com/virtual-kubelet/virtual-kubelet/trace"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// vkTracerName is the instrumentation scope of virtual-kubelet's spans.
const vkTracerName = "github.com/virtual-kubelet/virtual-kubelet"

// vkTracer is virtual-kubelet's trace.T: its node-controller spans become
// OTel spans, children of whatever span is in the ctx they are handed, and
// the fields it adds to a span reach the log lines it writes under it.
//
// It does what virtual-kubelet's own OTel adapter does, minus that
// adapter's costs on spans that are not recorded, which are nearly all of
// them when traces are sampled or not exported: that adapter looks the
// tracer up for every span, wraps every logger in one more layer, and
// formats every line logged under a span, Debug included, before the level
// check. This tracer looks its tracer up once, and only a recorded span's
// logger formats lines, as span events.
//
// When no span leaves the process (exporting false), only a span that
// starts a trace is an OTel span, for the ids it mints: our lines logged
// under it, and the claim or delete transaction started under it, carry
// its trace_id. A span under another one makes no OTel span at all:
// virtual-kubelet nests several per queue item (its queue, its handler,
// createOrUpdatePod), and each would draw ids, allocate and add a context
// layer that nothing shows, since unrecorded spans are never exported and
// the lines under it take the trace_id of the span above. The span's
// fields still label its lines.
type vkTracer struct {
	tracer    trace.Tracer
	exporting bool
}

func newVKTracer(exporting bool) vkTracer {
	return vkTracer{tracer: otel.Tracer(vkTracerName), exporting: exporting}
}

// unrecorded is the span of a vkSpan that makes no OTel span: it records
// nothing, and its End ends nothing.
var unrecorded = trace.SpanFromContext(context.Background())

func (t vkTracer) StartSpan(ctx context.Context, name string) (context.Context, vktrace.Span) {
	s := unrecorded
	if t.exporting || !trace.SpanContextFromContext(ctx).IsValid() {
		ctx, s = t.tracer.Start(ctx, name)
	}
	sp := &vkSpan{s: s, l: vklog.G(ctx).WithField("method", name)}
	return vklog.WithLogger(ctx, spanLogger{sp}), sp
}

// vkSpan is one virtual-kubelet span. The context StartSpan returns holds
// a spanLogger that reads the span's fields when a line is logged, so
// adding a field changes no context: virtual-kubelet adds several to each
// queue item's spans, and a context (and a logger) per field was most of
// what a span cost it.
type vkSpan struct {
	s  trace.Span
	mu sync.Mutex
	l  vklog.Logger // the span's fields, for the lines logged under it
}

func (s *vkSpan) End() { s.s.End() }

func (s *vkSpan) SetStatus(err error) {
	if !s.s.IsRecording() {
		return
	}
	if err == nil {
		s.s.SetStatus(codes.Ok, "")
	} else {
		s.s.SetStatus(codes.Error, err.Error())
	}
}

func (s *vkSpan) WithField(ctx context.Context, key string, val any) context.Context {
	s.mu.Lock()
	s.l = s.l.WithField(key, val)
	s.mu.Unlock()
	if s.s.IsRecording() {
		s.s.SetAttributes(vkAttribute(key, val))
	}
	return s.carried(ctx)
}

func (s *vkSpan) WithFields(ctx context.Context, f vklog.Fields) context.Context {
	s.mu.Lock()
	s.l = s.l.WithFields(f)
	s.mu.Unlock()
	if s.s.IsRecording() {
		for k, v := range f {
			s.s.SetAttributes(vkAttribute(k, v))
		}
	}
	return s.carried(ctx)
}

// carried is ctx with a logger that carries this span's fields: ctx itself
// when its logger is already this span's (the usual case: the context
// StartSpan returned, or one derived from it), else ctx with one added.
func (s *vkSpan) carried(ctx context.Context) context.Context {
	if l, ok := vklog.G(ctx).(spanLogger); ok && l.sp == s {
		return ctx
	}
	return vklog.WithLogger(ctx, spanLogger{s})
}

func (s *vkSpan) Logger() vklog.Logger {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logger()
}

// logger is the span's logger. Only a recorded span also gets each line
// as a span event; the caller holds mu.
func (s *vkSpan) logger() vklog.Logger {
	if s.s.IsRecording() {
		return eventLogger{Logger: s.l, s: s.s}
	}
	return s.l
}

// spanLogger is the logger in a span's context: each line, and each
// logger derived from it, takes the span's fields as they are at that
// moment.
type spanLogger struct{ sp *vkSpan }

func (l spanLogger) Debug(a ...any)                         { l.sp.Logger().Debug(a...) }
func (l spanLogger) Debugf(f string, a ...any)              { l.sp.Logger().Debugf(f, a...) }
func (l spanLogger) Info(a ...any)                          { l.sp.Logger().Info(a...) }
func (l spanLogger) Infof(f string, a ...any)               { l.sp.Logger().Infof(f, a...) }
func (l spanLogger) Warn(a ...any)                          { l.sp.Logger().Warn(a...) }
func (l spanLogger) Warnf(f string, a ...any)               { l.sp.Logger().Warnf(f, a...) }
func (l spanLogger) Error(a ...any)                         { l.sp.Logger().Error(a...) }
func (l spanLogger) Errorf(f string, a ...any)              { l.sp.Logger().Errorf(f, a...) }
func (l spanLogger) Fatal(a ...any)                         { l.sp.Logger().Fatal(a...) }
func (l spanLogger) Fatalf(f string, a ...any)              { l.sp.Logger().Fatalf(f, a...) }
func (l spanLogger) WithField(k string, v any) vklog.Logger { return l.sp.Logger().WithField(k, v) }
func (l spanLogger) WithFields(f vklog.Fields) vklog.Logger { return l.sp.Logger().WithFields(f) }
func (l spanLogger) WithError(err error) vklog.Logger       { return l.sp.Logger().WithError(err) }

// eventLogger logs, and adds each line to its recorded span as an event.
type eventLogger struct {
	vklog.Logger
	s trace.Span
}

func (l eventLogger) event(msg string) { l.s.AddEvent(msg, trace.WithTimestamp(time.Now())) }

func (l eventLogger) Debug(a ...any) { l.Logger.Debug(a...); l.event(fmt.Sprint(a...)) }
func (l eventLogger) Debugf(f string, a ...any) {
	l.Logger.Debugf(f, a...)
	l.event(fmt.Sprintf(f, a...))
}
func (l eventLogger) Info(a ...any) { l.Logger.Info(a...); l.event(fmt.Sprint(a...)) }
func (l eventLogger) Infof(f string, a ...any) {
	l.Logger.Infof(f, a...)
	l.event(fmt.Sprintf(f, a...))
}
func (l eventLogger) Warn(a ...any) { l.Logger.Warn(a...); l.event(fmt.Sprint(a...)) }
func (l eventLogger) Warnf(f string, a ...any) {
	l.Logger.Warnf(f, a...)
	l.event(fmt.Sprintf(f, a...))
}
func (l eventLogger) Error(a ...any) { l.Logger.Error(a...); l.event(fmt.Sprint(a...)) }
func (l eventLogger) Errorf(f string, a ...any) {
	l.Logger.Errorf(f, a...)
	l.event(fmt.Sprintf(f, a...))
}
func (l eventLogger) WithField(k string, v any) vklog.Logger {
	return eventLogger{Logger: l.Logger.WithField(k, v), s: l.s}
}
func (l eventLogger) WithFields(f vklog.Fields) vklog.Logger {
	return eventLogger{Logger: l.Logger.WithFields(f), s: l.s}
}
func (l eventLogger) WithError(err error) vklog.Logger {
	return eventLogger{Logger: l.Logger.WithError(err), s: l.s}
}

func vkAttribute(key string, val any) attribute.KeyValue {
	switch v := val.(type) {
	case string:
		return attribute.String(key, v)
	case int:
		return attribute.Int(key, v)
	case int64:
		return attribute.Int64(key, v)
	case float64:
		return attribute.Float64(key, v)
	case bool:
		return attribute.Bool(key, v)
	case error:
		if v == nil {
			return attribute.String(key, "")
		}
		return attribute.String(key, v.Error())
	case fmt.Stringer:
		return attribute.Stringer(key, v)
	default:
		return attribute.String(key, fmt.Sprint(v))
	}
}
