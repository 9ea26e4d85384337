package main

import (
	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

// cpuSnapshot and cpuDelta: CPU seconds by process, shared with bench/fleet.
var (
	cpuSnapshot = podload.CPUSnapshot
	cpuDelta    = podload.CPUDelta
)

// startPerf records call graphs of kube-apiserver, of vk-sandbox (if node
// runs one) and of the minimal node (if one runs) into
// dir/<tag>-<name>.perf.data until the returned func runs, so a provider
// mode and the claiming floor are profiled the same way in one invocation.
func startPerf(dir, tag string, node *vkNode) func() {
	pids := map[string]int{"kube-apiserver": podload.ChildPID("kube-apiserver")}
	if node != nil && node.vk != nil {
		pids["vk-sandbox"] = node.vk.Pid()
	}
	pids["nullnode"] = podload.ChildPID("nullnode")
	return podload.StartPerf(dir, tag, pids)
}
