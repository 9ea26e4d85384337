package testkit

import (
	"slices"
	"testing"
	"time"
)

// ReportLatencies reports the p50 and p99 of lats (one entry per
// operation) as p50-µs and p99-µs. It sorts lats in place.
func ReportLatencies(b *testing.B, lats []time.Duration) {
	if len(lats) == 0 {
		return
	}
	slices.Sort(lats)
	pct := func(p float64) float64 {
		return float64(lats[min(len(lats)-1, int(p*float64(len(lats))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}
