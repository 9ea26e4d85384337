package telemetry

import (
	"context"
	"net/url"
	"testing"
	"time"
)

// BenchmarkKubeClientMetrics is what metering one Kubernetes API request
// costs: client-go reports its wait for the rate limiter, its latency and
// its result, as it does for every status write and Event of a burst.
func BenchmarkKubeClientMetrics(b *testing.B) {
	isolateEnv(b)
	m := setup(b, Config{}).Metrics
	m.MeterKubeClients()
	ctx := context.Background()
	u := url.URL{Scheme: "https", Host: "10.0.0.1:6443", Path: "/api/v1/namespaces/{namespace}/pods/{name}/status"}
	b.ReportAllocs()
	for b.Loop() {
		restLatency{rateLimiter: true}.Observe(ctx, "PUT", u, time.Microsecond)
		restLatency{}.Observe(ctx, "PUT", u, time.Millisecond)
		restResult{}.Increment(ctx, "200", "PUT", u.Host)
	}
}
