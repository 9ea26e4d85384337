package main

import (
	"cmp"
	"fmt"
	"html"
	"math"
	"strings"
)

type point struct{ x, y float64 }

// series is one line. lo/hi, when set, hold per point the min and max of
// repeated runs (drawn as a vertical bar); they are parallel to pts.
type series struct {
	name   string
	pts    []point
	lo, hi []float64
}

// chart is a line chart: the CSV xy and CDF plots and the benchmark plots.
type chart struct {
	title, subtitle string
	x, y            axis
	series          []series
	step            bool // draw each line as a step function (a CDF)
	markers         bool // a dot per point, with the value as a tooltip
	legendCount     bool // "name (n points)" in the legend
}

const (
	width, height            = 900, 540
	left, right, top, bottom = 80, 30, 50, 60
	plotW, plotH             = width - left - right, height - top - bottom
	legendRow                = 18
	legendMinW               = 244
	fontAttr                 = `font-family="sans-serif" font-size="12"`
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// render draws c as a standalone SVG document.
func render(c chart) string {
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.series {
		for i, p := range s.pts {
			x0, x1 = math.Min(x0, c.x.t(p.x)), math.Max(x1, c.x.t(p.x))
			y0, y1 = math.Min(y0, c.y.t(p.y)), math.Max(y1, c.y.t(p.y))
			if s.lo != nil {
				y0, y1 = math.Min(y0, c.y.t(s.lo[i])), math.Max(y1, c.y.t(s.hi[i]))
			}
		}
	}
	x0, x1, xt := c.x.layout(x0, x1)
	y0, y1, yt := c.y.layout(y0, y1)
	pxT := func(t float64) float64 { return left + (t-x0)/span(x0, x1)*plotW }
	pyT := func(t float64) float64 { return top + plotH - (t-y0)/span(y0, y1)*plotH }
	px := func(x float64) float64 { return pxT(c.x.t(x)) }
	py := func(y float64) float64 { return pyT(c.y.t(y)) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="28" font-family="sans-serif" font-size="15" text-anchor="middle">%s</text>`+"\n", width/2, html.EscapeString(c.title))
	if c.subtitle != "" {
		fmt.Fprintf(&b, `<text x="%d" y="44" font-family="sans-serif" font-size="11" fill="#555" text-anchor="middle">%s</text>`+"\n", width/2, html.EscapeString(c.subtitle))
	}
	for _, t := range xt {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", pxT(t.at), top, pxT(t.at), top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" %s text-anchor="middle">%s</text>`+"\n", pxT(t.at), top+plotH+18, fontAttr, html.EscapeString(t.label))
	}
	for _, t := range yt {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, pyT(t.at), left+plotW, pyT(t.at))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" %s text-anchor="end">%s</text>`+"\n", left-6, pyT(t.at)+4, fontAttr, html.EscapeString(t.label))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" %s text-anchor="middle">%s</text>`+"\n", left+plotW/2, height-15, fontAttr, html.EscapeString(c.x.label))
	fmt.Fprintf(&b, `<text x="18" y="%d" %s text-anchor="middle" transform="rotate(-90 18 %d)">%s</text>`+"\n", top+plotH/2, fontAttr, top+plotH/2, html.EscapeString(c.y.label))

	labels := make([]string, len(c.series))
	lines := make([][]point, len(c.series)) // pixel coordinates
	for i, s := range c.series {
		n := len(s.pts)
		if c.step {
			n-- // the CDF's origin point is not a sample
		}
		labels[i] = cmp.Or(s.name, "all")
		if c.legendCount {
			labels[i] = fmt.Sprintf("%s (%d)", labels[i], n)
		}
		var prev *point
		for _, p := range s.pts {
			if c.step && prev != nil {
				lines[i] = append(lines[i], point{px(p.x), py(prev.y)})
			}
			lines[i] = append(lines[i], point{px(p.x), py(p.y)})
			prev = &p
		}
	}
	lw := legendWidth(labels)
	lx, ly0 := legendCorner(lines, lw, len(labels))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="white" fill-opacity="0.85" stroke="#ccc"/>`+"\n", lx-6, ly0-4, lw, len(labels)*legendRow+6)
	for i, s := range c.series {
		color := palette[i%len(palette)]
		pts := make([]string, len(lines[i]))
		for j, p := range lines[i] {
			pts[j] = fmt.Sprintf("%.1f,%.1f", p.x, p.y)
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		for j, p := range s.pts {
			if s.lo != nil && s.lo[j] != s.hi[j] {
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.2"/>`+"\n", px(p.x), py(s.lo[j]), px(p.x), py(s.hi[j]), color)
			}
			if c.markers {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s, %s</title></circle>`+"\n",
					px(p.x), py(p.y), color, html.EscapeString(s.name), html.EscapeString(c.x.fmt(p.x)), html.EscapeString(c.y.fmt(p.y)))
			}
		}
		ly := ly0 + 12 + i*legendRow
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", lx, ly-4, lx+24, ly-4, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" %s>%s</text>`+"\n", lx+30, ly, fontAttr, html.EscapeString(labels[i]))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
