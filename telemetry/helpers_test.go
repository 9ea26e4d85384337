package telemetry

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// isolateEnv blanks every OTEL_* variable Setup reads, so a developer's
// shell (or CI) exporting to a collector cannot change test outcomes.
func isolateEnv(t testing.TB) {
	t.Helper()
	for _, k := range []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_METRICS_EXEMPLAR_FILTER",
	} {
		t.Setenv(k, "")
	}
}

// setup runs Setup with a clean environment and shuts down at test end.
func setup(t testing.TB, c Config) *Telemetry {
	t.Helper()
	tel, err := Setup(context.Background(), c)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel
}

// setupInMemory is Setup with a synchronous in-memory span exporter.
func setupInMemory(t testing.TB) (*Telemetry, *tracetest.InMemoryExporter) {
	t.Helper()
	isolateEnv(t)
	exp := tracetest.NewInMemoryExporter()
	return setup(t, Config{SpanExporter: exp, NodeName: "node-a", Version: "v1.2.3"}), exp
}

// get performs a GET against h and returns status and body.
func get(t *testing.T, h http.Handler, path, accept string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// sample returns the value of series (name plus its sorted label set, as
// exposed) in a text-format scrape, and whether it was present.
func sample(body, series string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), series+" ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		v, err := strconv.ParseFloat(f[0], 64)
		return v, err == nil
	}
	return 0, false
}
