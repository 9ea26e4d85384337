package main

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// csvOpts are the flags of the CSV modes (xy lines and -cdf).
type csvOpts struct {
	x, y, series, value string
	cdf, logx           bool
	title               string
	xlabel, ylabel      string
}

// csvChart reads a CSV with a header row and builds either one line per
// series of (x, y) points sorted by x, or (cdf) the empirical CDF of the
// value column per series. Rows whose numbers do not parse are skipped.
func csvChart(r io.Reader, o csvOpts) (chart, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return chart{}, err
	}
	if len(recs) < 1 {
		return chart{}, errors.New("empty CSV")
	}
	col := func(name string) (int, error) {
		i := slices.Index(recs[0], name)
		if i < 0 {
			return 0, fmt.Errorf("no column %q in %v", name, recs[0])
		}
		return i, nil
	}
	var scols []int
	for s := range strings.SplitSeq(o.series, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c, err := col(s)
			if err != nil {
				return chart{}, err
			}
			scols = append(scols, c)
		}
	}
	label := func(r []string) string {
		parts := make([]string, len(scols))
		for i, c := range scols {
			parts[i] = r[c]
		}
		return strings.Join(parts, " ")
	}
	xname, yc := o.x, -1
	xlabel, ylabel := cmp.Or(o.xlabel, o.x), cmp.Or(o.ylabel, o.y)
	if o.cdf {
		xname = o.value
		xlabel, ylabel = cmp.Or(o.xlabel, o.value), cmp.Or(o.ylabel, "fraction of Pods")
	} else if yc, err = col(o.y); err != nil {
		return chart{}, err
	}
	xc, err := col(xname)
	if err != nil {
		return chart{}, err
	}
	byName := map[string]int{} // label → index in out
	var out []series
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
		name := label(r)
		i, ok := byName[name]
		if !ok {
			i = len(out)
			byName[name] = i
			out = append(out, series{name: name})
		}
		out[i].pts = append(out[i].pts, point{x, y})
	}
	if len(out) == 0 {
		return chart{}, errors.New("no numeric rows")
	}
	for i := range out {
		pts := out[i].pts
		slices.SortStableFunc(pts, func(a, b point) int { return cmp.Compare(a.x, b.x) })
		if o.cdf {
			// Invariant: y is the fraction of samples <= x, from an
			// origin at (first x, 0).
			for j := range pts {
				pts[j].y = float64(j+1) / float64(len(pts))
			}
			out[i].pts = append([]point{{pts[0].x, 0}}, pts...)
		}
	}
	return chart{
		title:       o.title,
		x:           axis{label: xlabel, log: o.logx},
		y:           axis{label: ylabel},
		series:      out,
		step:        o.cdf,
		legendCount: true,
	}, nil
}
