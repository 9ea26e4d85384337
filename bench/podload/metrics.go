package podload

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

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
	return ParseMetrics(string(body)), nil
}

// ParseMetrics parses the Prometheus text format; comments and lines it
// cannot read are skipped. Label values must not contain `,` or `}`, as
// is the case for the apiserver's.
func ParseMetrics(body string) []Sample {
	var out []Sample
	for line := range strings.SplitSeq(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		s := Sample{Labels: map[string]string{}}
		rest := line
		if open := strings.IndexByte(line, '{'); open >= 0 {
			end := strings.LastIndexByte(line, '}')
			if end < open {
				continue
			}
			s.Name, rest = line[:open], line[end+1:]
			for kv := range strings.SplitSeq(line[open+1:end], ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					s.Labels[k] = strings.Trim(v, `"`)
				}
			}
		} else {
			name, v, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			s.Name, rest = name, v
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.Value = v
		out = append(out, s)
	}
	return out
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
	return Sum(samples, "apiserver_request_total", func(l map[string]string) string {
		return l["verb"] + " " + Resource(l) + " " + l["code"]
	})
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
