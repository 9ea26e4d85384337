package spansvg

import (
	"strconv"
	"time"
)

// ticks returns the offsets of "nice" tick marks (steps of 1, 2 or 5 times
// a power of ten) from 0 up to total, about want of them.
func ticks(total time.Duration, want int) []time.Duration {
	if total <= 0 || want < 1 {
		return []time.Duration{0}
	}
	raw := total / time.Duration(want)
	step := time.Duration(1)
	for step*10 <= raw {
		step *= 10
	}
	switch {
	case raw > 5*step:
		step *= 10
	case raw > 2*step:
		step *= 5
	case raw > step:
		step *= 2
	}
	var out []time.Duration
	for t := time.Duration(0); t <= total; t += step {
		out = append(out, t)
	}
	return out
}

// formatDuration prints d with three significant digits in the largest
// unit that keeps it at least 1: 850ns, 12.3µs, 1.25ms, 2.5s.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	units := []struct {
		size time.Duration
		name string
	}{{time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "µs"}}
	for _, u := range units {
		if d >= u.size {
			v := float64(d) / float64(u.size)
			return strconv.FormatFloat(v, 'f', decimals(v), 64) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// decimals keeps three significant digits (at most two decimals).
func decimals(v float64) int {
	switch {
	case v >= 100:
		return 0
	case v >= 10:
		return 1
	default:
		return 2
	}
}
