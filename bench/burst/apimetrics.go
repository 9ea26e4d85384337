package main

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// apiRequests scrapes the apiserver's apiserver_request_total and returns
// it keyed "VERB resource[/subresource] code".
func apiRequests(ctx context.Context, cs kubernetes.Interface) map[string]float64 {
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for kv := range strings.SplitSeq(line[len("apiserver_request_total{"):end], ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(val, `"`)
			}
		}
		res := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out[labels["verb"]+" "+res+" "+labels["code"]] += v
	}
	return out
}

// requestDelta is after - before, nonzero entries only.
func requestDelta(before, after map[string]float64) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := int(v - before[k] + 0.5); d > 0 {
			out[k] = d
		}
	}
	return out
}

// topRequests formats the largest entries of a delta, "k=v, ...".
func topRequests(d map[string]int, n int) string {
	keys := slices.Collect(maps.Keys(d))
	slices.SortFunc(keys, func(a, b string) int { return d[b] - d[a] })
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, k+"="+strconv.Itoa(d[k]))
	}
	return strings.Join(parts, ", ")
}
