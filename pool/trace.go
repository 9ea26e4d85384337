package pool

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the client's tracer (the instrumentation scope of the
// sandboxd.* spans).
const tracerName = "github.com/cocoonstack/vk-sandbox/pool"

// propagator is explicit rather than the global one: the telemetry
// contract (docs/observability.md) requires W3C traceparent towards
// sandboxd whatever OTEL_PROPAGATORS says.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// clientSpan is every attempt's start option, built once: a variadic
// option list made per call would be an allocation per call.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// spanNames are the span names of the verbs, built once ("sandboxd.claim").
var spanNames = func() map[string]string {
	m := map[string]string{}
	for _, v := range []string{VerbClaim, VerbRelease, VerbList, VerbGet, VerbInfo, verbRenew, verbHealthz, VerbExec, VerbPorts, VerbStats} {
		m[v] = "sandboxd." + v
	}
	return m
}()

func spanName(verb string) string {
	if n, ok := spanNames[verb]; ok {
		return n
	}
	return "sandboxd." + verb
}

// clientTracer is the tracing of one Client: an OTel client span per HTTP
// attempt, and its context sent to sandboxd as traceparent (and baggage).
// It replaces a tracing RoundTripper (otelhttp), which copies every
// request, wraps both bodies and builds the span's attributes even when
// the span is not recorded; here a span that is not recorded (no exporter,
// the default) costs its ids and the traceparent header, nothing else.
type clientTracer struct {
	tracer trace.Tracer
	// server are the server.address and server.port of every span.
	server []attribute.KeyValue
}

// newClientTracer takes the tracer of the global provider as it is now:
// the daemon installs its provider before it builds the Client, and the
// global provider forwards to one installed later.
func newClientTracer(u *url.URL) clientTracer {
	host, portStr, err := net.SplitHostPort(u.Host)
	if err != nil {
		host = u.Hostname()
	}
	port, _ := strconv.Atoi(portStr)
	if port == 0 {
		port = 80
		if u.Scheme == "https" {
			port = 443
		}
	}
	return clientTracer{
		tracer: otel.GetTracerProvider().Tracer(tracerName),
		server: []attribute.KeyValue{semconv.ServerAddress(host), semconv.ServerPort(port)},
	}
}

// start begins req's span, a child of ctx's, and writes its traceparent
// into req's header. req must be the caller's own: its header is written.
func (t clientTracer) start(ctx context.Context, verb string, req *http.Request) trace.Span {
	sctx, span := t.tracer.Start(ctx, spanName(verb), clientSpan...)
	propagator.Inject(sctx, propagation.HeaderCarrier(req.Header))
	if span.IsRecording() {
		u := *req.URL
		u.User = nil // url.full never carries credentials
		span.SetAttributes(append([]attribute.KeyValue{
			semconv.HTTPRequestMethodKey.String(req.Method), semconv.URLFull(u.String()),
		}, t.server...)...)
	}
	return span
}

// answered records resp's status on span and returns the body to read:
// the span ends when it is closed. A status of 400 or more is an Error
// span, as semantic conventions have it for a client. An upgraded
// exchange's span ends now: the relay that follows is not the attempt.
func answered(span trace.Span, resp *http.Response) io.ReadCloser {
	if !span.IsRecording() {
		span.End()
		return resp.Body
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 400 || resp.StatusCode < 100 {
		span.SetStatus(codes.Error, "")
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		span.End()
		return resp.Body
	}
	return &spanBody{ReadCloser: resp.Body, span: span}
}

// failed ends span for an attempt that got no answer; msg is the scrubbed
// error text.
func failed(span trace.Span, err error, msg string) {
	if span.IsRecording() {
		span.SetAttributes(semconv.ErrorType(err))
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}

// spanBody ends its span when the body is closed (drainClose always
// closes it).
type spanBody struct {
	io.ReadCloser
	span trace.Span
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.span.End()
	return err
}
