package main

import (
	"slices"
	"strings"
	"testing"
)

const burstCSV = `n,mode,latency_s
100,bare,0.3
100,bare,0.1
100,provider,0.5
100,bare,
100,bare,0.2
100,provider,0.4
`

// -cdf: one step line per series in first-seen order, y the fraction of
// samples <= x from an origin at (min, 0); rows without a value skipped.
func TestCSVChartCDF(t *testing.T) {
	c, err := csvChart(strings.NewReader(burstCSV), csvOpts{cdf: true, value: "latency_s", series: "mode,n"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.series) != 2 || c.series[0].name != "bare 100" || c.series[1].name != "provider 100" {
		t.Fatalf("series = %q", seriesNames(c.series))
	}
	want := []point{{0.1, 0}, {0.1, 1.0 / 3}, {0.2, 2.0 / 3}, {0.3, 1}}
	if !slices.Equal(c.series[0].pts, want) {
		t.Errorf("bare CDF = %v, want %v", c.series[0].pts, want)
	}
	if !c.step || c.x.label != "latency_s" || c.y.label != "fraction of Pods" {
		t.Errorf("step %v labels %q %q", c.step, c.x.label, c.y.label)
	}
	svg := render(c)
	wellFormed(t, "cdf", []byte(svg))
	// The legend counts samples, not the origin point.
	for _, l := range []string{">bare 100 (3)<", ">provider 100 (2)<"} {
		if !strings.Contains(svg, l) {
			t.Errorf("legend lacks %q", l)
		}
	}
}

func TestCSVChartXYAndErrors(t *testing.T) {
	c, err := csvChart(strings.NewReader(burstCSV), csvOpts{x: "latency_s", y: "n", series: ""})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.series) != 1 || len(c.series[0].pts) != 5 || c.series[0].pts[0] != (point{0.1, 100}) {
		t.Errorf("xy = %+v", c.series)
	}
	if _, err := csvChart(strings.NewReader(burstCSV), csvOpts{cdf: true, value: "nope"}); err == nil || !strings.Contains(err.Error(), `no column "nope"`) {
		t.Errorf("missing column: err = %v", err)
	}
}
