package podload

import (
	"math"
	"slices"
)

// Stats summarises a latency sample in seconds. Percentiles are nearest
// rank; an empty sample is all zeros with N 0.
type Stats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_s"`
	P50  float64 `json:"p50_s"`
	P90  float64 `json:"p90_s"`
	P99  float64 `json:"p99_s"`
	Max  float64 `json:"max_s"`
}

// Summarize is the Stats of a sample in seconds.
func Summarize(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Stats{
		N: len(s), Mean: sum / float64(len(s)),
		P50: rank(s, 0.50), P90: rank(s, 0.90), P99: rank(s, 0.99), Max: s[len(s)-1],
	}
}

// rank is the nearest-rank percentile of a sorted sample.
func rank(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
