package telemetry

import (
	"context"
	"net/url"
	"testing"
	"time"
)

// Each request client-go reports lands in the series of its own labels:
// the attribute sets are built once per label combination, and one
// combination's set must never stand for another's.
func TestKubeClientRequestsAreCountedByTheirOwnLabels(t *testing.T) {
	tel, _ := setupInMemory(t)
	tel.Metrics.MeterKubeClients()
	ctx := context.Background()
	a := url.URL{Scheme: "https", Host: "10.0.0.1:6443"}
	b := url.URL{Scheme: "https", Host: "10.0.0.2:6443"}
	for range 2 {
		restResult{}.Increment(ctx, "200", "PUT", a.Host)
		restLatency{}.Observe(ctx, "PUT", a, time.Millisecond)
	}
	restResult{}.Increment(ctx, "409", "PUT", a.Host)
	restResult{}.Increment(ctx, "200", "POST", b.Host)
	restLatency{}.Observe(ctx, "GET", b, time.Millisecond)
	restLatency{rateLimiter: true}.Observe(ctx, "PUT", b, time.Millisecond)

	_, body := get(t, tel.Handler(nil), "/metrics", "")
	for series, want := range map[string]float64{
		`rest_client_requests_total{code="200",host="10.0.0.1:6443",method="PUT"}`:         2,
		`rest_client_requests_total{code="409",host="10.0.0.1:6443",method="PUT"}`:         1,
		`rest_client_requests_total{code="200",host="10.0.0.2:6443",method="POST"}`:        1,
		`rest_client_request_duration_seconds_count{host="10.0.0.1:6443",verb="PUT"}`:      2,
		`rest_client_request_duration_seconds_count{host="10.0.0.2:6443",verb="GET"}`:      1,
		`rest_client_rate_limiter_duration_seconds_count{host="10.0.0.2:6443",verb="PUT"}`: 1,
	} {
		if got, ok := sample(body, series); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
}
