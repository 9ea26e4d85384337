package main

import "testing"

// The legend moves off the data: a line through the bottom corners (inside
// the default box) puts the legend at the top, and the reverse.
func TestLegendAvoidsLines(t *testing.T) {
	low := [][]point{{{left, top + plotH - 20}, {left + plotW, top + plotH - 20}}}
	_, ly0 := legendCorner(low, legendMinW, 2)
	if ly0 > top+plotH/2 {
		t.Errorf("legend at y %d overlaps a line along the bottom", ly0)
	}
	high := [][]point{{{left, top + 20}, {left + plotW, top + 20}}}
	if _, ly0 := legendCorner(high, legendMinW, 2); ly0 < top+plotH/2 {
		t.Errorf("legend at y %d overlaps a line along the top", ly0)
	}
}
