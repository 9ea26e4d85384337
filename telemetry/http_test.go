package telemetry

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func TestReadyzReflectsReadinessAndHealthzDoesNot(t *testing.T) {
	tel, _ := setupInMemory(t)
	var loaded atomic.Bool // written by the test, read by the server goroutine
	h := tel.Handler(func() error {
		if !loaded.Load() {
			return errors.New("claim store not loaded")
		}
		return nil
	})

	if code, body := get(t, h, "/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "claim store not loaded") {
		t.Fatalf("/readyz = %d %q, want 503 with the cause", code, body)
	}
	if code, body := get(t, h, "/healthz", ""); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz while not ready = %d %q, want 200 ok", code, body)
	}
	loaded.Store(true)
	if code, body := get(t, h, "/readyz", ""); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/readyz once ready = %d %q, want 200 ok", code, body)
	}
}

func TestReadyzWithNilReadyIsReady(t *testing.T) {
	tel, _ := setupInMemory(t)
	if code, _ := get(t, tel.Handler(nil), "/readyz", ""); code != http.StatusOK {
		t.Fatalf("/readyz with nil ready = %d, want 200", code)
	}
}

func TestMetricsServesOpenMetricsOnRequest(t *testing.T) {
	tel, _ := setupInMemory(t)
	code, body := get(t, tel.Handler(nil), "/metrics", "application/openmetrics-text")
	if code != http.StatusOK || !strings.HasSuffix(body, "# EOF\n") {
		t.Fatalf("/metrics (OpenMetrics) = %d, body does not end in # EOF", code)
	}
}
