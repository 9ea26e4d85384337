package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// procStat returns a process's command name, parent pid and user+system
// CPU seconds from /proc/PID/stat.
func procStat(pid int) (comm string, ppid int, cpu float64, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, 0, false
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, 0, false
	}
	f := strings.Fields(s[closing+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return s[open+1 : closing], ppid, (ut + st) / clockTicks, true
}

// cpuByProcess is CPU seconds so far of this process ("harness") and of
// its direct children (kube-apiserver, etcd, vk-sandbox), by command name.
func cpuByProcess() map[string]float64 {
	out := map[string]float64{}
	self := os.Getpid()
	if _, _, c, ok := procStat(self); ok {
		out["harness"] = c
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, ppid, c, ok := procStat(pid); ok && ppid == self {
			out[comm] += c
		}
	}
	return out
}

// machineBusy is the CPU seconds all cores spent not idle, from /proc/stat.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	busy := 0.0
	for i, v := range f[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		busy += x
	}
	return busy / clockTicks
}

// cpuDelta is after - before per name, plus "machine" (all processes on
// the machine) and "other" (machine minus ours: load from elsewhere).
func cpuDelta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	ours := 0.0
	for k, v := range after {
		if k == "machine" {
			continue
		}
		d := v - before[k]
		out[k] = round3(d)
		ours += d
	}
	m := after["machine"] - before["machine"]
	out["machine"] = round3(m)
	out["other"] = round3(m - ours)
	return out
}

func cpuSnapshot() map[string]float64 {
	s := cpuByProcess()
	s["machine"] = machineBusy()
	return s
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// childPID is the pid of this process's child named comm, or 0.
func childPID(comm string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, ppid, _, ok := procStat(pid); ok && ppid == os.Getpid() && c == comm {
			return pid
		}
	}
	return 0
}

// startPerf records call graphs of kube-apiserver and (if node is set)
// vk-sandbox into dir/<tag>-<name>.perf.data until the returned func runs.
func startPerf(dir, tag string, node *vkNode) func() {
	_ = os.MkdirAll(dir, 0o755)
	pids := map[string]int{"kube-apiserver": childPID("kube-apiserver")}
	if node != nil && node.cmd != nil {
		pids["vk-sandbox"] = node.cmd.Process.Pid
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
