package main

import (
	"math"
	"unicode/utf8"
)

// legendWidth estimates the legend box width from its longest label
// (about 6.6 px per character at 12 px sans-serif).
func legendWidth(labels []string) int {
	w := legendMinW
	for _, l := range labels {
		w = max(w, 30+int(6.6*float64(utf8.RuneCountInString(l)))+12)
	}
	return min(w, plotW-24)
}

// legendCorner places the legend (returning lx, ly0 as render uses them) in
// the plot corner that covers the fewest line samples, preferring bottom
// right, then top left, top right, bottom left.
func legendCorner(lines [][]point, lw, rows int) (int, int) {
	h := rows*legendRow + 6
	corners := [][2]int{ // box top-left corner
		{left + plotW - 12 - lw, top + plotH - 8 - h},
		{left + 12, top + 8},
		{left + plotW - 12 - lw, top + 8},
		{left + 12, top + plotH - 8 - h},
	}
	best, bestHits := 0, math.MaxInt
	for i, c := range corners {
		hits := 0
		inside := func(p point) bool {
			return p.x >= float64(c[0]) && p.x <= float64(c[0]+lw) && p.y >= float64(c[1]) && p.y <= float64(c[1]+h)
		}
		for _, l := range lines {
			for j := range l {
				if j == 0 {
					if inside(l[0]) {
						hits++
					}
					continue
				}
				// Sample the segment so a line crossing the box counts.
				for k := 1; k <= 16; k++ {
					f := float64(k) / 16
					if inside(point{l[j-1].x + f*(l[j].x-l[j-1].x), l[j-1].y + f*(l[j].y-l[j-1].y)}) {
						hits++
					}
				}
			}
		}
		if hits < bestHits {
			best, bestHits = i, hits
		}
	}
	return corners[best][0] + 6, corners[best][1] + 4
}
