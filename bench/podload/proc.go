package podload

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// ProcStat returns a process's command name, parent pid and user+system
// CPU seconds from /proc/PID/stat.
func ProcStat(pid int) (comm string, ppid int, cpu float64, ok bool) {
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

// PeakRSS is a process's peak resident set size in bytes (VmHWM from
// /proc/PID/status), or 0 if it cannot be read.
func PeakRSS(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v) // "12345 kB"
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// cpuByProcess is CPU seconds so far of this process ("harness") and of
// its direct children (kube-apiserver, etcd, vk-sandbox), by command name.
func cpuByProcess() map[string]float64 {
	out := map[string]float64{}
	self := os.Getpid()
	if _, _, c, ok := ProcStat(self); ok {
		out["harness"] = c
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, ppid, c, ok := ProcStat(pid); ok && ppid == self {
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

// CPUDelta is after - before per name, plus "machine" (all processes on
// the machine) and "other" (machine minus ours: load from elsewhere).
func CPUDelta(before, after map[string]float64) map[string]float64 {
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

// NodeCPU is the node processes' CPU seconds in a CPUDelta: vk-sandbox's,
// or bench/nullnode's.
func NodeCPU(cpu map[string]float64) float64 { return cpu["vk-sandbox"] + cpu["nullnode"] }

// CPUSnapshot is cpuByProcess plus "machine" (machineBusy).
func CPUSnapshot() map[string]float64 {
	s := cpuByProcess()
	s["machine"] = machineBusy()
	return s
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// LoadAvg is the 1, 5 and 15 minute load averages, "0.62 1.25 1.30".
func LoadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
