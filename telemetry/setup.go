package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/otlptranslator"
	vktrace "github.com/virtual-kubelet/virtual-kubelet/trace"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of every span and instrument this
// product creates.
const TracerName = "github.com/cocoonstack/vk-sandbox"

const defaultServiceName = "vk-sandbox"

// Config configures Setup. Export destinations are deliberately absent: they
// come from the standard OTEL_* environment variables only, so operators
// configure vk-sandbox like any other OTel-instrumented process.
type Config struct {
	// ServiceName is the resource's service.name. Default "vk-sandbox";
	// OTEL_SERVICE_NAME (and service.name in OTEL_RESOURCE_ATTRIBUTES) wins.
	ServiceName string
	// Version is service.version and the instrumentation scope version.
	Version string
	// NodeName is the virtual node's name, recorded as host.name and
	// k8s.node.name. Empty leaves both unset.
	NodeName string
	// SpanExporter, when set, replaces the OTLP exporter and is driven by a
	// synchronous span processor, so a test sees each span as soon as it
	// ends (e.g. tracetest.InMemoryExporter).
	SpanExporter sdktrace.SpanExporter
}

// Telemetry is the process's tracer and meter setup. Build it with Setup.
type Telemetry struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Metrics holds every instrument of the product.
	Metrics *Metrics
	// Registry is what /metrics serves: the OTel instruments plus the Go
	// and process collectors. It is dedicated, not the global default, so
	// nothing registered by a dependency leaks into our scrape.
	Registry *prometheus.Registry
	// ExportingTraces reports whether spans leave the process. When false
	// no exporter exists and spans are never recorded; they only carry ids.
	ExportingTraces bool

	version      string
	tp           *sdktrace.TracerProvider
	mp           *sdkmetric.MeterProvider
	shutdownOnce sync.Once
	shutdownErr  error
}

// Setup builds the tracer and meter providers, installs them (and the W3C
// TraceContext+Baggage propagator) as the OTel globals, and points
// virtual-kubelet's own tracing at them so its spans (createOrUpdatePod,
// ...) join our traces. Call Shutdown before exit to flush spans.
func Setup(ctx context.Context, c Config) (*Telemetry, error) {
	res, err := newResource(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}

	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	exporting := true
	if c.SpanExporter != nil {
		tpOpts = append(tpOpts, sdktrace.WithSyncer(c.SpanExporter))
	} else if exp, err := otlpExporter(ctx); err != nil {
		return nil, err
	} else if exp != nil {
		// No WithSampler here: the SDK then reads OTEL_TRACES_SAMPLER and
		// OTEL_TRACES_SAMPLER_ARG itself (default parentbased_always_on).
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	} else {
		// Nothing would receive a recorded span, so record none: a
		// non-recording span still gets fresh trace and span ids (for log
		// correlation and traceparent) but skips attribute and event
		// bookkeeping. BenchmarkSpanOverhead measures the difference.
		exporting = false
		tpOpts = append(tpOpts, sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)

	reg := prometheus.NewRegistry()
	mp, err := newMeterProvider(reg, res)
	if err != nil {
		return nil, errors.Join(err, tp.Shutdown(ctx))
	}
	m, err := newMetrics(mp.Meter(TracerName, metric.WithInstrumentationVersion(c.Version)))
	if err != nil {
		return nil, errors.Join(err, tp.Shutdown(ctx), mp.Shutdown(ctx))
	}

	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{}, propagation.Baggage{}))
	// virtual-kubelet v1.14 traces through its own trace.T (see vkTracer),
	// from the global provider set just above.
	vktrace.T = newVKTracer(exporting)

	return &Telemetry{
		TracerProvider:  tp,
		MeterProvider:   mp,
		Metrics:         m,
		Registry:        reg,
		ExportingTraces: exporting,
		version:         c.Version,
		tp:              tp,
		mp:              mp,
	}, nil
}

// Tracer returns the product's tracer, named TracerName.
func (t *Telemetry) Tracer() trace.Tracer {
	return t.TracerProvider.Tracer(TracerName, trace.WithInstrumentationVersion(t.version))
}

// Shutdown flushes buffered spans to the exporter and stops both providers.
// It is safe to call more than once; later calls return the first result.
// The globals are left in place: spans started after Shutdown are dropped.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.shutdownOnce.Do(func() {
		t.shutdownErr = errors.Join(t.tp.Shutdown(ctx), t.mp.Shutdown(ctx))
	})
	return t.shutdownErr
}

// otlpExporter returns the OTLP/HTTP trace exporter when the environment
// asks for one, and nil when it does not. Only the presence of an endpoint
// variable turns export on: the exporter's built-in default
// (localhost:4318) would otherwise make every node retry a dead collector.
func otlpExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	switch v := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); v {
	case "", "otlp":
	case "none":
		return nil, nil
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q is not supported (want otlp or none)", v)
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	// Only the HTTP exporter is linked in. Failing here beats silently
	// posting protobuf-over-HTTP at a gRPC port.
	if proto != "" && proto != "http/protobuf" {
		return nil, fmt.Errorf("OTLP protocol %q is not supported (want http/protobuf)", proto)
	}
	// otlptracehttp reads endpoint, headers, timeout, compression,
	// certificates and insecure from the environment when given no options.
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	return exp, nil
}

// newResource describes this process. Precedence, lowest first:
// resource.Default(), then Config, then OTEL_RESOURCE_ATTRIBUTES and
// OTEL_SERVICE_NAME, so an operator can always override what the binary says.
func newResource(ctx context.Context, c Config) (*resource.Resource, error) {
	name := c.ServiceName
	if name == "" {
		name = defaultServiceName
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(name)}
	if c.Version != "" {
		attrs = append(attrs, semconv.ServiceVersion(c.Version))
	}
	if c.NodeName != "" {
		attrs = append(attrs, semconv.HostName(c.NodeName), semconv.K8SNodeName(c.NodeName))
	}
	own, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(attrs...),
		resource.WithFromEnv(), // last detector wins
	)
	// A malformed OTEL_RESOURCE_ATTRIBUTES yields a partial resource; keep
	// what parsed rather than refuse to start over a label.
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, err
	}
	return resource.Merge(resource.Default(), own)
}

// newMeterProvider wires the OTel SDK to Prometheus. The exemplar filter is
// left at the SDK default (trace_based, overridable by
// OTEL_METRICS_EXEMPLAR_FILTER): a measurement taken under a sampled span
// carries that span's trace id into the histogram bucket it lands in.
func newMeterProvider(reg *prometheus.Registry, res *resource.Resource) (*sdkmetric.MeterProvider, error) {
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		// Explicit, because the exporter's default depends on a global in
		// prometheus/common and is announced to change.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		// One meter serves the whole product, so otel_scope_* labels on
		// every series would be noise.
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	return sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(exp)), nil
}
