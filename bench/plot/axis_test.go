package main

import (
	"math"
	"testing"
)

func TestLogAxisLayout(t *testing.T) {
	a := axis{log: true, format: nanos}
	t0, t1, ts := a.layout(math.Log10(2544), math.Log10(230131610))
	if t0 != 3 || t1 != 9 {
		t.Fatalf("range [%v, %v], want decades [3, 9]", t0, t1)
	}
	// Six decades: decades only, labelled as durations.
	var labels []string
	for _, tk := range ts {
		labels = append(labels, tk.label)
	}
	want := []string{"1µs", "10µs", "100µs", "1ms", "10ms", "100ms", "1s"}
	if len(labels) != len(want) {
		t.Fatalf("labels %q, want %q", labels, want)
	}
	for i := range want {
		if labels[i] != want[i] {
			t.Errorf("labels %q, want %q", labels, want)
			break
		}
	}
	// Two decades: 1-2-5 ticks.
	_, _, ts = axis{log: true}.layout(0, 2)
	if len(ts) != 7 || ts[1].label != "2" || ts[2].label != "5" || ts[6].label != "100" {
		t.Errorf("1-2-5 ticks = %+v", ts)
	}
}

func TestUnitFormats(t *testing.T) {
	for v, want := range map[float64]string{20000: "20k", 1.5e6: "1.5M", 500: "500", 0: "0"} {
		if got := si(v); got != want {
			t.Errorf("si(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{1000: "1µs", 1999.9999: "2µs", 5e8: "500ms", 1e9: "1s"} {
		if got := nanos(v); got != want {
			t.Errorf("nanos(%v) = %q, want %q", v, got, want)
		}
	}
}
