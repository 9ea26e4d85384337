package podload

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// Sample is one line of a Prometheus text exposition.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Scrape reads the apiserver's /metrics. Histogram and summary series
// are kept like any other.
func Scrape(ctx context.Context, cs kubernetes.Interface) ([]Sample, error) {
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return ParseMetrics(string(body))
}

// ParseMetrics parses the Prometheus text format with expfmt, flattening
// each family into the lines an exposition shows: a counter, gauge or
// untyped value as itself, a histogram as _bucket (with le), _sum and
// _count, a summary as its quantiles, _sum and _count. A body that does
// not parse is an error.
func ParseMetrics(body string) ([]Sample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	var out []Sample
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			add := func(suffix string, v float64, extra ...string) {
				l := make(map[string]string, len(m.GetLabel())+1)
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				for i := 0; i+1 < len(extra); i += 2 {
					l[extra[i]] = extra[i+1]
				}
				out = append(out, Sample{Name: name + suffix, Labels: l, Value: v})
			}
			switch {
			case m.GetCounter() != nil:
				add("", m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				add("", m.GetGauge().GetValue())
			case m.GetUntyped() != nil:
				add("", m.GetUntyped().GetValue())
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add("_bucket", float64(b.GetCumulativeCount()), "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
				}
				add("_sum", h.GetSampleSum())
				add("_count", float64(h.GetSampleCount()))
			case m.GetSummary() != nil:
				sm := m.GetSummary()
				for _, q := range sm.GetQuantile() {
					add("", q.GetValue(), "quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64))
				}
				add("_sum", sm.GetSampleSum())
				add("_count", float64(sm.GetSampleCount()))
			}
		}
	}
	return out, nil
}

// Sum adds up the samples of metric name by key(labels); samples whose key
// is "" are left out.
func Sum(samples []Sample, name string, key func(map[string]string) string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		if k := key(s.Labels); k != "" {
			out[k] += s.Value
		}
	}
	return out
}

// Resource is "resource[/subresource]" of an apiserver request metric.
func Resource(l map[string]string) string {
	if sub := l["subresource"]; sub != "" {
		return l["resource"] + "/" + sub
	}
	return l["resource"]
}

// APIRequests scrapes apiserver_request_total and returns it keyed
// "VERB resource[/subresource] code" (nil if the scrape failed).
func APIRequests(ctx context.Context, cs kubernetes.Interface) map[string]float64 {
	samples, err := Scrape(ctx, cs)
	if err != nil {
		return nil
	}
	out := Sum(samples, "apiserver_request_total", func(l map[string]string) string {
		return l["verb"] + " " + Resource(l) + " " + l["code"]
	})
	// Watchers the apiserver closed because they fell behind: each one is
	// reopened, and an informer's reopen may resend everything it watches.
	maps.Copy(out, Sum(samples, "apiserver_terminated_watchers_total", func(l map[string]string) string {
		return "TERMINATED-WATCHER " + Resource(l)
	}))
	return out
}

// Delta is after - before, rounded, nonzero entries only.
func Delta(before, after map[string]float64) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := int(v - before[k] + 0.5); d > 0 {
			out[k] = d
		}
	}
	return out
}

// Top formats the largest entries of a delta, "k=v, ...".
func Top(d map[string]int, n int) string {
	keys := slices.Collect(maps.Keys(d))
	slices.SortFunc(keys, func(a, b string) int {
		if c := d[b] - d[a]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, k+"="+strconv.Itoa(d[k]))
	}
	return strings.Join(parts, ", ")
}
