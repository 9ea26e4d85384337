package main

import (
	"math"
	"strconv"
	"time"
)

// tick is one labelled axis position, at in transformed units (log10 of
// the value on a log axis).
type tick struct {
	at    float64
	label string
}

// axis describes one chart axis. The zero value is a linear axis that
// starts at 0 with automatic 1-2-5 ticks labelled by num.
type axis struct {
	label  string
	log    bool                 // log10 scale
	ticks  []float64            // explicit tick values (data units); nil: automatic
	format func(float64) string // tick labels; nil: num
}

// t maps a data value to transformed (plotting) units.
func (a axis) t(v float64) float64 {
	if a.log {
		return math.Log10(math.Max(v, 1e-12))
	}
	return v
}

func (a axis) fmt(v float64) string {
	if a.format == nil {
		return num(v)
	}
	return a.format(v)
}

// layout returns the axis range [t0, t1] in transformed units covering the
// transformed data range [lo, hi], and its ticks.
func (a axis) layout(lo, hi float64) (t0, t1 float64, ts []tick) {
	switch {
	case a.ticks != nil:
		// Explicit ticks (the benchmark's own parameter values): pad the
		// range a little so the end points do not sit on the frame.
		for _, v := range a.ticks {
			lo, hi = math.Min(lo, a.t(v)), math.Max(hi, a.t(v))
			ts = append(ts, tick{a.t(v), a.fmt(v)})
		}
		pad := 0.06 * (hi - lo)
		if pad == 0 {
			pad = 0.5
		}
		return lo - pad, hi + pad, ts
	case a.log:
		t0, t1 = math.Floor(lo), math.Ceil(hi)
		if t1 == t0 {
			t1++
		}
		mults := []float64{1, 2, 5}
		if t1-t0 > 5 {
			mults = mults[:1] // many decades: label decades only
		}
		for e := t0; e <= t1; e++ {
			for _, m := range mults {
				if t := e + math.Log10(m); t <= t1 {
					ts = append(ts, tick{t, a.fmt(math.Pow(10, t))})
				}
			}
		}
		return t0, t1, ts
	default:
		vs := ticks(math.Min(lo, 0), hi)
		for _, v := range vs {
			ts = append(ts, tick{v, a.fmt(v)})
		}
		return vs[0], vs[len(vs)-1], ts
	}
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

// si labels large counts compactly: 20000 → "20k", 1500000 → "1.5M".
func si(x float64) string {
	switch a := math.Abs(x); {
	case a >= 1e9:
		return num(x/1e9) + "G"
	case a >= 1e6:
		return num(x/1e6) + "M"
	case a >= 1e3:
		return num(x/1e3) + "k"
	}
	return num(x)
}

// nanos labels a duration given in nanoseconds: 2000 → "2µs".
func nanos(x float64) string { return time.Duration(math.Round(x)).String() }
