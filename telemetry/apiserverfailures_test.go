package telemetry

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// An unreachable apiserver is logged at warn once per cause, with a count:
// repeats are counted, the first repeat after the window carries their
// number, a new cause is logged at once, and other klog errors pass.
func TestAPIServerFailuresAreLoggedOncePerCauseWithACount(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	klog.SetSlogLogger(slog.New(newAPIServerFailures(NewLogger(&buf, slog.LevelInfo, true).Handler(), &failureCounts{causes: map[string]*failureCount{}}, time.Minute, func() time.Time { return now })))
	t.Cleanup(func() { klog.ClearLogger() })

	refused := func(port int) error {
		return errors.New(`failed to list *v1.Pod: Get "https://10.0.0.1:6443/api/v1/pods?fieldSelector=spec.nodeName%3Dn&resourceVersion=` +
			string(rune('0'+port)) + `": dial tcp 10.0.0.1:6443: connect: connection refused`)
	}
	reset := errors.New(`Get "https://10.0.0.1:6443/api/v1/pods?watch=true": read tcp 10.0.0.5:53422->10.0.0.1:6443: read: connection reset by peer`)
	for i := range 5 {
		klog.ErrorS(refused(i), "Failed to watch", "reflector", "pods")
	}
	now = now.Add(61 * time.Second)
	klog.ErrorS(refused(7), "Failed to watch", "reflector", "pods") // after the window: logged with the repeats
	klog.ErrorS(reset, "Failed to watch", "reflector", "pods")      // a new cause: logged at once
	klog.ErrorS(errors.New("object has no meta"), "Unable to understand watch event")
	klog.Flush()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []struct{ level, cause, count string }{
		{`"level":"WARN"`, `"cause":"dial tcp 10.0.0.1:6443: connect: connection refused"`, `"count":1`},
		{`"level":"WARN"`, `"cause":"dial tcp 10.0.0.1:6443: connect: connection refused"`, `"count":5`},
		{`"level":"WARN"`, `"cause":"read tcp 10.0.0.1:6443: read: connection reset by peer"`, `"count":1`},
		{`"level":"ERROR"`, ``, ``},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		for _, s := range []string{w.level, w.cause, w.count} {
			if !strings.Contains(lines[i], s) {
				t.Errorf("line %d lacks %s: %s", i, s, lines[i])
			}
		}
	}
	if !strings.Contains(lines[0], `"reflector":"pods"`) {
		t.Errorf("the folded line lost its attributes: %s", lines[0])
	}
}

// A refused connection and a 401 from the apiserver are logged at warn by
// the clients' transport, once per cause however often they repeat.
func TestAPIServerTransportLogsEachCauseOnce(t *testing.T) {
	var buf bytes.Buffer
	rt := LogAPIServerFailures(NewLogger(&buf, slog.LevelInfo, true))(http.DefaultTransport)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) }))
	defer refuse.Close()
	for range 3 {
		for _, url := range []string{closed.URL, refuse.URL} {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/api/v1/pods", nil)
			if resp, err := rt.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "connection refused") || !strings.Contains(lines[1], "401 Unauthorized") {
		t.Fatalf("want one refused and one 401 line:\n%s", buf.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, `"level":"WARN"`) || !strings.Contains(l, `"count":1`) || !strings.Contains(l, `"path":"/api/v1/pods"`) {
			t.Errorf("line: %s", l)
		}
	}
}
