package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// apiFailures is the one table of apiserver failure causes, shared by the
// transport (LogAPIServerFailures) and klog's handler (InstallKlog), so a
// cause is logged once whichever path sees it.
var apiFailures = &failureCounts{causes: map[string]*failureCount{}}

// apiFailureWindow is how long repeats of one cause are only counted.
const apiFailureWindow = time.Minute

// LogAPIServerFailures wraps the apiserver clients' transport (a
// rest.Config's Wrap) so that every request that gets no answer, or a 401,
// is logged at warn: once per distinct cause with a count, then at most
// once a minute per cause. client-go retries a refused or timed-out
// connection inside its reflectors and logs it only at klog's V(2), which
// is never emitted: without this, a wrong or unreachable apiserver is
// silence.
func LogAPIServerFailures(l *slog.Logger) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return apiServerTransport{next: next, log: l, now: time.Now}
	}
}

type apiServerTransport struct {
	next http.RoundTripper
	log  *slog.Logger
	now  func() time.Time
}

func (t apiServerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	var cause string
	switch {
	case err != nil && !errors.Is(err, context.Canceled) && req.Context().Err() == nil:
		cause = ephemeralPort.ReplaceAllString(err.Error(), "")
	case err == nil && resp.StatusCode == http.StatusUnauthorized:
		cause = "401 Unauthorized: the apiserver refused the kubeconfig's credentials"
	}
	if cause != "" {
		if count, ok := apiFailures.note(cause, t.now(), apiFailureWindow); ok {
			t.log.Warn("apiserver request failed", "cause", cause, "count", count,
				"host", req.URL.Host, "method", req.Method, "path", req.URL.Path)
		}
	}
	return resp, err
}
