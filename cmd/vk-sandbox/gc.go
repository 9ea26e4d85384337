package main

import (
	"log/slog"
	"runtime/debug"
)

// The collector's settings when the operator leaves GOGC and GOMEMLIMIT
// unset. A node's garbage is nearly all per-Pod and short-lived (watch
// decodes, copies, status encodes), so collecting at 5× the live heap
// instead of 2× cuts the collections of a burst by about four. The soft
// memory limit, sized from the node's Pod budget, brings back the default
// rate as the node fills: at the full budget, about 30 KiB of live heap per
// Pod plus the base, the limit is near twice the live heap, as with
// GOGC=100. A node held past its budget only collects more often, like
// Go's default would, never endlessly: the limit stays above the live heap
// until about four times the budget's per-Pod figure.
const (
	gcPercentFromBudget = 400
	gcLimitBase         = 128 << 20 // bytes: the process's own heap, informers and buffers
	gcLimitPerPod       = 128 << 10 // bytes per Pod of --node-pods
)

// gcSettings are the collector settings to apply, from --node-pods and the
// environment. ok is false when the operator set GOGC or GOMEMLIMIT: then
// the runtime's own reading of both stands.
func gcSettings(nodePods int, getenv func(string) string) (percent int, limit int64, ok bool) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return 0, 0, false
	}
	return gcPercentFromBudget, gcLimitBase + int64(max(nodePods, 0))*gcLimitPerPod, true
}

// tuneGC applies gcSettings and logs what it set.
func tuneGC(nodePods int, getenv func(string) string, log *slog.Logger) {
	percent, limit, ok := gcSettings(nodePods, getenv)
	if !ok {
		log.Info("garbage collector left to GOGC/GOMEMLIMIT from the environment")
		return
	}
	debug.SetGCPercent(percent)
	debug.SetMemoryLimit(limit)
	log.Info("garbage collector sized from --node-pods", "gogc", percent, "gomemlimit_mib", limit>>20, "node_pods", nodePods)
}
