package main

import "testing"

// Each burst size's ratios compare the modes of that size only: provider
// over the minimal node beside provider over bare (and over the minimal
// node that claims), "-" for a mode that was not run, and "(partial)" when
// a run did not finish.
func TestRatiosSetProviderAgainstTheMinimalNodeAndBare(t *testing.T) {
	run := func(n int, mode string, wall, watch, nodeCPU float64, complete bool) runResult {
		cpu := map[string]float64{}
		switch mode {
		case modeProvider:
			cpu["vk-sandbox"] = nodeCPU
		case modeNull, modeNullClaim:
			cpu["nullnode"] = nodeCPU
		}
		return runResult{N: n, Mode: mode, WallS: wall, WatchS: watch, CPU: cpu, Complete: complete}
	}
	got := runRatios([]runResult{
		run(1000, modeBare, 2, 2.5, 0, true),
		run(1000, modeProvider, 6, 6, 1.5, true),
		run(1000, modeNull, 4, 4, 0.5, true),
		run(1000, modeNullClaim, 5, 5, 1, true),
		run(100, modeProvider, 1, 1, 0.2, false),
		run(100, modeNull, 0.5, 0.5, 0.05, true),
	})
	want := []ratios{
		{N: 1000, ProviderNull: "1.50 [1.50]", ProviderBare: "3.00 [2.40]", NullBare: "2.00 [1.60]", DefaultProvider: "-",
			CPUProviderNull: "3.00 (1.500 / 0.500 ms)", ProviderNullClaim: "1.20 [1.20]", NullClaimNull: "1.25 [1.25]",
			CPUProviderNullClaim: "1.50 (1.500 / 1.000 ms)"},
		{N: 100, ProviderNull: "2.00 [2.00] (partial)", ProviderBare: "-", NullBare: "-", DefaultProvider: "-",
			CPUProviderNull: "4.00 (2.000 / 0.500 ms)", ProviderNullClaim: "-", NullClaimNull: "-", CPUProviderNullClaim: "-"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d sizes, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("N=%d:\n got %+v\nwant %+v", want[i].N, got[i], want[i])
		}
	}
}
