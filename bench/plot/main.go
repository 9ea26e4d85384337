// Command plot renders an SVG line chart from a CSV with a header row
// (standard library only).
//
// Two shapes of input:
//
//	plot -in points.csv -out chart.svg [-x x -y y -series series]
//	    one line per distinct value of the series column, points sorted by x
//	plot -cdf -value client_latency_s -series mode,n -in burst.csv -out cdf.svg
//	    the empirical CDF of the value column, one line per series
//
// -series takes several columns joined into one label; empty values are
// skipped. -logx draws x on a log10 scale.
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"html"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

type point struct{ x, y float64 }

func main() {
	in := flag.String("in", "", "input CSV (header row required)")
	out := flag.String("out", "", "output SVG (default: input with .svg)")
	xcol := flag.String("x", "x", "x column (xy mode)")
	ycol := flag.String("y", "y", "y column (xy mode)")
	scol := flag.String("series", "series", "series column(s), comma separated; empty: one series")
	cdf := flag.Bool("cdf", false, "plot the empirical CDF of -value per series")
	vcol := flag.String("value", "value", "value column (cdf mode)")
	title := flag.String("title", "", "chart title")
	xlabel := flag.String("xlabel", "", "x axis label (default: the column name)")
	ylabel := flag.String("ylabel", "", "y axis label (default: the column name, or 'fraction of Pods' with -cdf)")
	logx := flag.Bool("logx", false, "log10 x axis")
	flag.Parse()
	if *in == "" {
		fail("-in is required")
	}
	if *out == "" {
		*out = strings.TrimSuffix(*in, ".csv") + ".svg"
	}
	f, err := os.Open(*in)
	if err != nil {
		fail(err.Error())
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(recs) < 1 {
		fail(fmt.Sprintf("read %s: %v", *in, err))
	}
	col := func(name string) int {
		i := slices.Index(recs[0], name)
		if i < 0 {
			fail(fmt.Sprintf("no column %q in %v", name, recs[0]))
		}
		return i
	}
	var scols []int
	for s := range strings.SplitSeq(*scol, ",") {
		if s = strings.TrimSpace(s); s != "" {
			scols = append(scols, col(s))
		}
	}
	label := func(r []string) string {
		parts := make([]string, len(scols))
		for i, c := range scols {
			parts[i] = r[c]
		}
		return strings.Join(parts, " ")
	}
	series := map[string][]point{}
	var order []string
	add := func(name string, p point) {
		if _, ok := series[name]; !ok {
			order = append(order, name)
		}
		series[name] = append(series[name], p)
	}
	xc, yc := -1, -1
	if *cdf {
		xc = col(*vcol)
		*xlabel, *ylabel = cmpOr(*xlabel, *vcol), cmpOr(*ylabel, "fraction of Pods")
	} else {
		xc, yc = col(*xcol), col(*ycol)
		*xlabel, *ylabel = cmpOr(*xlabel, *xcol), cmpOr(*ylabel, *ycol)
	}
	for _, r := range recs[1:] {
		x, err := strconv.ParseFloat(r[xc], 64)
		if err != nil {
			continue
		}
		y := 0.0
		if yc >= 0 {
			if y, err = strconv.ParseFloat(r[yc], 64); err != nil {
				continue
			}
		}
		add(label(r), point{x, y})
	}
	for name, pts := range series {
		slices.SortFunc(pts, func(a, b point) int { return cmpF(a.x, b.x) })
		if *cdf {
			for i := range pts {
				pts[i].y = float64(i+1) / float64(len(pts))
			}
			series[name] = append([]point{{pts[0].x, 0}}, pts...)
		}
	}
	if len(order) == 0 {
		fail("no numeric rows")
	}
	svg := render(order, series, *title, *xlabel, *ylabel, *logx, *cdf)
	if err := os.WriteFile(*out, []byte(svg), 0o644); err != nil {
		fail(err.Error())
	}
	fmt.Println(*out)
}

const (
	width, height            = 900, 540
	left, right, top, bottom = 80, 30, 50, 60
	plotW, plotH             = width - left - right, height - top - bottom
	legendRow                = 18
	fontAttr                 = `font-family="sans-serif" font-size="12"`
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

func render(order []string, series map[string][]point, title, xlabel, ylabel string, logx, step bool) string {
	tx := func(x float64) float64 { return x }
	if logx {
		tx = func(x float64) float64 { return math.Log10(math.Max(x, 1e-12)) }
	}
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, pts := range series {
		for _, p := range pts {
			x0, x1 = math.Min(x0, tx(p.x)), math.Max(x1, tx(p.x))
			y0, y1 = math.Min(y0, p.y), math.Max(y1, p.y)
		}
	}
	y0 = math.Min(y0, 0)
	if !logx {
		x0 = math.Min(x0, 0)
	}
	xt, yt := ticks(x0, x1), ticks(y0, y1)
	if !logx {
		x0, x1 = xt[0], xt[len(xt)-1]
	} else {
		x0, x1 = math.Floor(x0), math.Ceil(x1)
		xt = xt[:0]
		for e := x0; e <= x1; e++ {
			for _, m := range []float64{1, 2, 5} {
				if t := e + math.Log10(m); t <= x1 {
					xt = append(xt, t)
				}
			}
		}
	}
	y0, y1 = yt[0], yt[len(yt)-1]
	px := func(x float64) float64 { return left + (tx(x)-x0)/span(x0, x1)*plotW }
	pxT := func(t float64) float64 { return left + (t-x0)/span(x0, x1)*plotW }
	py := func(y float64) float64 { return top + plotH - (y-y0)/span(y0, y1)*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="28" font-family="sans-serif" font-size="15" text-anchor="middle">%s</text>`+"\n", width/2, html.EscapeString(title))
	for _, t := range xt {
		lbl := num(t)
		if logx {
			lbl = num(math.Pow(10, t))
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", pxT(t), top, pxT(t), top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" %s text-anchor="middle">%s</text>`+"\n", pxT(t), top+plotH+18, fontAttr, lbl)
	}
	for _, t := range yt {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, py(t), left+plotW, py(t))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" %s text-anchor="end">%s</text>`+"\n", left-6, py(t)+4, fontAttr, num(t))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" %s text-anchor="middle">%s</text>`+"\n", left+plotW/2, height-15, fontAttr, html.EscapeString(xlabel))
	fmt.Fprintf(&b, `<text x="18" y="%d" %s text-anchor="middle" transform="rotate(-90 18 %d)">%s</text>`+"\n", top+plotH/2, fontAttr, top+plotH/2, html.EscapeString(ylabel))
	lx, ly0 := left+plotW-250, top+plotH-10-len(order)*legendRow
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="244" height="%d" fill="white" fill-opacity="0.85" stroke="#ccc"/>`+"\n", lx-6, ly0-4, len(order)*legendRow+6)
	for i, name := range order {
		color := palette[i%len(palette)]
		n := len(series[name])
		if step {
			n-- // the CDF's origin point is not a sample
		}
		var pts []string
		var prev *point
		for _, p := range series[name] {
			if step && prev != nil {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.x), py(prev.y)))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.y)))
			prev = &p
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		ly := ly0 + 12 + i*legendRow
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", lx, ly-4, lx+24, ly-4, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" %s>%s (%d)</text>`+"\n", lx+30, ly, fontAttr, html.EscapeString(cmpOr(name, "all")), n)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// ticks covers [lo, hi] with 1-2-5 steps, about 8 of them.
func ticks(lo, hi float64) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / 8
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag * 10
	for _, m := range []float64{1, 2, 5} {
		if raw <= m*mag {
			step = m * mag
			break
		}
	}
	var out []float64
	for t := math.Floor(lo/step) * step; t < hi+step*0.999; t += step {
		out = append(out, t)
	}
	return out
}

func span(a, b float64) float64 { return math.Max(b-a, 1e-12) }

func num(x float64) string { return strconv.FormatFloat(math.Round(x*1e6)/1e6, 'g', 6, 64) }

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "plot:", msg)
	os.Exit(2)
}
