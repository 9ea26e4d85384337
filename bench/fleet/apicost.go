package main

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

// apiSnap is one scrape of the apiserver's /metrics, reduced to what the
// per-node cost needs.
type apiSnap struct {
	at time.Time
	// byFlow: apiserver_flowcontrol_dispatched_requests_total by
	// flow_schema; each node has its own (flowSchemaFor).
	byFlow map[string]float64
	// byVerb: apiserver_request_total by "VERB resource[/sub]", less
	// apiserver_selfrequest_total (the apiserver's own loopback clients),
	// resource requests only (the harness's /metrics scrapes are not).
	byVerb map[string]float64
	// watches: apiserver_longrunning_requests{verb="WATCH"} by resource,
	// the watches open at the moment of the scrape.
	watches map[string]float64
}

func (f *fleet) snap(ctx context.Context) (apiSnap, error) {
	s, err := podload.Scrape(ctx, f.cs)
	if err != nil {
		return apiSnap{}, err
	}
	verbRes := func(l map[string]string) string {
		if l["resource"] == "" {
			return ""
		}
		return l["verb"] + " " + podload.Resource(l)
	}
	byVerb := podload.Sum(s, "apiserver_request_total", verbRes)
	for k, v := range podload.Sum(s, "apiserver_selfrequest_total", verbRes) {
		byVerb[k] -= v
	}
	return apiSnap{
		at:     time.Now(),
		byFlow: podload.Sum(s, "apiserver_flowcontrol_dispatched_requests_total", func(l map[string]string) string { return l["flow_schema"] }),
		byVerb: byVerb,
		watches: podload.Sum(s, "apiserver_longrunning_requests", func(l map[string]string) string {
			if l["verb"] != "WATCH" {
				return ""
			}
			return podload.Resource(l)
		}),
	}, nil
}

// apiWindow is the apiserver's view of one phase of the run.
type apiWindow struct {
	Seconds float64 `json:"seconds"`
	// PerNode is each node's request count (its FlowSchema's dispatches;
	// watches count when they open).
	PerNode map[string]int `json:"per_node_requests"`
	// PerNodeRate summarises PerNode / Seconds over the nodes.
	PerNodeRate rateStats `json:"per_node_requests_per_s"`
	// ByVerb is every client's requests except the apiserver's own
	// ("VERB resource": count). LIST and WATCH count when they end.
	ByVerb map[string]int `json:"by_verb_resource"`
	// Lists is the LIST count in ByVerb.
	Lists int `json:"lists"`
}

type rateStats struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

func window(a, b apiSnap, nodes []*node) apiWindow {
	w := apiWindow{Seconds: b.at.Sub(a.at).Seconds(), PerNode: map[string]int{}, ByVerb: podload.Delta(a.byVerb, b.byVerb)}
	for k, v := range w.ByVerb {
		if strings.HasPrefix(k, "LIST ") {
			w.Lists += v
		}
	}
	var rates []float64
	for i, n := range nodes {
		c := int(b.byFlow[flowSchemaFor(i)] - a.byFlow[flowSchemaFor(i)] + 0.5)
		w.PerNode[n.name] = c
		rates = append(rates, float64(c)/w.Seconds)
	}
	if len(rates) > 0 {
		w.PerNodeRate = rateStats{Min: slices.Min(rates), Max: slices.Max(rates)}
		for _, r := range rates {
			w.PerNodeRate.Mean += r / float64(len(rates))
		}
	}
	return w
}

// watchDelta is the watches opened between a and b, by resource.
func watchDelta(a, b apiSnap) map[string]float64 {
	out := map[string]float64{}
	for _, k := range slices.Sorted(maps.Keys(b.watches)) {
		if d := b.watches[k] - a.watches[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
