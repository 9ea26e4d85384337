package telemetry

import (
	"net/http"
	"strings"
	"testing"
)

func TestProfilingIsServedOnlyWhereAskedAndKeepsTheOtherEndpoints(t *testing.T) {
	tel, _ := setupInMemory(t)
	plain := tel.Handler(nil)
	if code, _ := get(t, plain, "/debug/pprof/", ""); code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ without profiling = %d, want 404", code)
	}
	prof := WithProfiling(plain)
	if code, body := get(t, prof, "/debug/pprof/", ""); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/ with profiling = %d, want 200 with the profile index", code)
	}
	if code, body := get(t, prof, "/debug/pprof/goroutine?debug=1", ""); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Fatalf("goroutine profile = %d", code)
	}
	if code, body := get(t, prof, "/healthz", ""); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz behind profiling = %d %q", code, body)
	}
	if code, body := get(t, prof, "/metrics", "application/openmetrics-text"); code != http.StatusOK || !strings.HasSuffix(body, "# EOF\n") {
		t.Fatalf("/metrics behind profiling = %d", code)
	}
}
