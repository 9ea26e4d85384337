package main

import "testing"

// The fleet is set against the bare fill and the minimal nodes' fills
// (with and without the claim) of the same run, in time and in the nodes' CPU per Pod; a fill not run
// leaves its ratio out.
func TestFleetRatiosAgainstBareAndTheMinimalNodes(t *testing.T) {
	fill := func(watch, nodeCPU float64, cpuName string) *fillResult {
		return &fillResult{WatchS: watch, Pods: 2000, Complete: true, CPU: map[string]float64{cpuName: nodeCPU}}
	}
	rep := &report{Bare: fill(5, 0, "harness"), NullNodes: fill(8, 2, "nullnode"), Fleet: fill(12, 6, "vk-sandbox")}
	rep.setRatios()
	if rep.Ratio != 12.0/5 || rep.RatioNull != 12.0/8 || rep.CPURatioNull != 3 {
		t.Errorf("fleet / bare %v, fleet / null-nodes %v, CPU fleet / null-nodes %v; want 2.4, 1.5, 3", rep.Ratio, rep.RatioNull, rep.CPURatioNull)
	}
	if got := over(rep.Fleet, rep.NullNodes); got != "1.50" {
		t.Errorf("over = %q, want 1.50", got)
	}
	if rep.RatioNullClaim != 0 || rep.CPURatioNullClaim != 0 {
		t.Errorf("without a null-nodes-claim fill: ratios %v, %v; want none", rep.RatioNullClaim, rep.CPURatioNullClaim)
	}
	rep.NullClaim = fill(10, 4, "nullnode")
	rep.setRatios()
	if rep.RatioNullClaim != 12.0/10 || rep.CPURatioNullClaim != 1.5 || rep.RatioNull != 12.0/8 {
		t.Errorf("fleet / null-nodes-claim %v, CPU %v, fleet / null-nodes %v; want 1.2, 1.5, 1.5", rep.RatioNullClaim, rep.CPURatioNullClaim, rep.RatioNull)
	}

	alone := &report{Fleet: fill(12, 6, "vk-sandbox")}
	alone.setRatios()
	if alone.Ratio != 0 || alone.RatioNull != 0 || alone.CPURatioNull != 0 {
		t.Errorf("without bare and null-nodes fills: ratios %v, %v, %v; want none", alone.Ratio, alone.RatioNull, alone.CPURatioNull)
	}
	if got := over(alone.Fleet, alone.NullNodes); got != "-" {
		t.Errorf("over a missing fill = %q, want -", got)
	}
}
