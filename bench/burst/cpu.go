package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

// cpuSnapshot and cpuDelta: CPU seconds by process, shared with bench/fleet.
var (
	cpuSnapshot = podload.CPUSnapshot
	cpuDelta    = podload.CPUDelta
)

// childPID is the pid of this process's child named comm, or 0.
func childPID(comm string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, ppid, _, ok := podload.ProcStat(pid); ok && ppid == os.Getpid() && c == comm {
			return pid
		}
	}
	return 0
}

// startPerf records call graphs of kube-apiserver, of vk-sandbox (if node
// runs one) and of the minimal node (if one runs) into
// dir/<tag>-<name>.perf.data until the returned func runs, so a provider
// mode and the claiming floor are profiled the same way in one invocation.
func startPerf(dir, tag string, node *vkNode) func() {
	_ = os.MkdirAll(dir, 0o755)
	pids := map[string]int{"kube-apiserver": childPID("kube-apiserver")}
	if node != nil && node.vk != nil {
		pids["vk-sandbox"] = node.vk.Pid()
	}
	if pid := childPID("nullnode"); pid != 0 {
		pids["nullnode"] = pid
	}
	var cmds []*exec.Cmd
	for name, pid := range pids {
		if pid == 0 {
			continue
		}
		out := filepath.Join(dir, fmt.Sprintf("%s-%s.perf.data", tag, name))
		c := exec.Command("perf", "record", "-F", "499", "-g", "-o", out, "-p", strconv.Itoa(pid))
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "perf:", err)
			continue
		}
		cmds = append(cmds, c)
	}
	return func() {
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGINT)
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
	}
}
