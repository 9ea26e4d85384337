package main

import (
	"math"
	"regexp"
	"strconv"
	"testing"
)

var circleRE = regexp.MustCompile(`<circle cx="([0-9.]+)" cy="([0-9.]+)"`)

// On log axes equal ratios are equal distances: points at 1, 10, 100 (x)
// and 1e3, 1e4, 1e5 (y) are evenly spaced, left to right and bottom up.
func TestRenderLogAxesSpacing(t *testing.T) {
	c := chart{
		x:       axis{log: true, ticks: []float64{1, 10, 100}},
		y:       axis{log: true, format: nanos},
		series:  []series{{name: "s", pts: []point{{1, 1e3}, {10, 1e4}, {100, 1e5}}}},
		markers: true,
	}
	svg := render(c)
	wellFormed(t, "log chart", []byte(svg))
	m := circleRE.FindAllStringSubmatch(svg, -1)
	if len(m) != 3 {
		t.Fatalf("%d markers, want 3", len(m))
	}
	var cx, cy []float64
	for _, g := range m {
		x, _ := strconv.ParseFloat(g[1], 64)
		y, _ := strconv.ParseFloat(g[2], 64)
		cx, cy = append(cx, x), append(cy, y)
	}
	if !(cx[0] < cx[1] && cx[1] < cx[2]) || !(cy[0] > cy[1] && cy[1] > cy[2]) {
		t.Fatalf("markers not increasing: x %v y %v", cx, cy)
	}
	if dx1, dx2 := cx[1]-cx[0], cx[2]-cx[1]; math.Abs(dx1-dx2) > 0.2 {
		t.Errorf("x decades %.1f and %.1f px apart: not a log scale", dx1, dx2)
	}
	if dy1, dy2 := cy[0]-cy[1], cy[1]-cy[2]; math.Abs(dy1-dy2) > 0.2 {
		t.Errorf("y decades %.1f and %.1f px apart: not a log scale", dy1, dy2)
	}
	// Every point lies inside the plot frame.
	for i := range cx {
		if cx[i] < left || cx[i] > left+plotW || cy[i] < top || cy[i] > top+plotH {
			t.Errorf("marker %d at (%.1f, %.1f) outside the frame", i, cx[i], cy[i])
		}
	}
}
