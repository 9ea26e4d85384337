package main

import (
	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

// cpuSnapshot and cpuDelta: CPU seconds by process, shared with bench/fleet.
var (
	cpuSnapshot = podload.CPUSnapshot
	cpuDelta    = podload.CPUDelta
)

// startPerf records call graphs of kube-apiserver and (if node is set)
// vk-sandbox into dir/<tag>-<name>.perf.data until the returned func runs.
func startPerf(dir, tag string, node *vkNode) func() {
	pids := map[string]int{"kube-apiserver": podload.ChildPID("kube-apiserver")}
	if node != nil && node.vk != nil {
		pids["vk-sandbox"] = node.vk.Pid()
	}
	return podload.StartPerf(dir, tag, pids)
}
