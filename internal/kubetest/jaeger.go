package kubetest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Jaeger is a running Jaeger v2 all-in-one (scripts/build-tools.sh jaeger):
// an OTLP/HTTP receiver, in-memory trace storage, and the query API and UI,
// each on a fresh loopback port. Nothing else listens: the collector's own
// metrics and the other receivers of Jaeger's default configuration are
// off, so that parallel runs on one machine never collide.
type Jaeger struct {
	// OTLPEndpoint is the base URL for OTEL_EXPORTER_OTLP_ENDPOINT, e.g.
	// http://127.0.0.1:40123 (traces go to /v1/traces).
	OTLPEndpoint string
	// QueryURL is the query API and UI, e.g. http://127.0.0.1:40125.
	QueryURL string
	// Log is Jaeger's combined stdout and stderr; Config its configuration.
	Log, Config string

	p *proc
}

// JaegerOptions configure StartJaeger. The zero value is ready to use.
type JaegerOptions struct {
	// Dir holds the configuration and the log. Default: a new temporary
	// directory (left in place, for the log).
	Dir string
	// Logf receives progress lines. Default: none.
	Logf func(format string, args ...any)
	// StartTimeout bounds the wait for the query API. Default 60s.
	StartTimeout time.Duration
	// UIAssets, if set, is a directory of built Jaeger UI assets for the
	// query service to serve. A Jaeger built from the Go module proxy has
	// none embedded and serves a placeholder page instead of the UI.
	UIAssets string
}

// StartJaeger finds or builds the jaeger binary and starts it, returning
// once its query API answers. Stop it with Stop.
func StartJaeger(ctx context.Context, o JaegerOptions) (*Jaeger, error) {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	bin, err := binary(ctx, "jaeger", o.Logf)
	if err != nil {
		return nil, err
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "jaeger-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	j := &Jaeger{Log: filepath.Join(o.Dir, "jaeger.log"), Config: filepath.Join(o.Dir, "jaeger.yaml")}
	j.p, err = startOnFreePorts(ctx, "jaeger", 3, o.StartTimeout, o.Logf, func(ports []int) (*proc, func(context.Context) error, error) {
		j.OTLPEndpoint = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		j.QueryURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])
		if err := os.WriteFile(j.Config, []byte(jaegerConfig(ports, o.UIAssets)), 0o644); err != nil {
			return nil, nil, err
		}
		p, err := startProc("jaeger", bin, []string{"--config", j.Config}, j.Log)
		return p, func(ctx context.Context) error { return httpOK(ctx, j.QueryURL+"/api/services") }, err
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// Stop ends Jaeger (SIGTERM, then SIGKILL after 5s). Its stored traces go
// with it. It is idempotent.
func (j *Jaeger) Stop() error {
	if j == nil {
		return nil
	}
	return stopOnce(&j.p, 5*time.Second)
}

// TraceURL is the UI page of one trace.
func (j *Jaeger) TraceURL(traceID string) string { return j.QueryURL + "/trace/" + traceID }

// jaegerConfig is an all-in-one configuration on the given ports: OTLP/HTTP
// in, memory storage, the query service's HTTP and gRPC out.
func jaegerConfig(ports []int, uiAssets string) string {
	ui := ""
	if uiAssets != "" {
		ui = fmt.Sprintf("    ui:\n      assets_path: %q\n", uiAssets)
	}
	return fmt.Sprintf(`# Written by kubetest.StartJaeger.
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
%sreceivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, ports[1], ports[2], ui, ports[0])
}

// startOnFreePorts starts a child on n fresh loopback ports (start builds
// its command and readiness probe from them) and waits for the probe. A
// child that lost a port race is started again on new ports.
func startOnFreePorts(ctx context.Context, name string, n int, timeout time.Duration, logf func(string, ...any),
	start func(ports []int) (*proc, func(context.Context) error, error)) (*proc, error) {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		p, probe, err := start(ports)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		err = waitReady(ctx, p, timeout, probe)
		if err == nil {
			return p, nil
		}
		_ = p.stop(0)
		if attempt < portRetries && isAddrInUse(p.tail(50)) {
			if logf != nil {
				logf("kubetest: %s lost a port race (%v); retrying on new ports", name, ports)
			}
			continue
		}
		return nil, err
	}
}

// httpOK is a readiness probe: GET url answers 200.
func httpOK(ctx context.Context, url string) error {
	_, err := httpGet(ctx, url, 512)
	return err
}

// httpGet returns the body (at most limit bytes) of GET url, and an error
// unless it answered 200.
func httpGet(ctx context.Context, url string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %d %.300s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return body, err
}

// stopOnce stops *pp (SIGTERM, then SIGKILL after grace) and clears it, so
// a second call does nothing.
func stopOnce(pp **proc, grace time.Duration) error {
	p := *pp
	if p == nil {
		return nil
	}
	*pp = nil
	return p.stop(grace)
}

// TracerProvider exports spans of service to this Jaeger over OTLP/HTTP
// in batches of at most 100ms, as an OTel SDK configured by OTEL_* would:
// for an in-process emulator's server spans (sim.Config.TracerProvider).
// Shut it down to flush.
func (j *Jaeger) TracerProvider(ctx context.Context, service string) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(j.OTLPEndpoint+"/v1/traces"))
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(100*time.Millisecond)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service)))), nil
}
