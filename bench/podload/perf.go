package podload

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// ChildPID is the pid of this process's child named comm, or 0.
func ChildPID(comm string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, ppid, _, ok := ProcStat(pid); ok && ppid == os.Getpid() && c == comm {
			return pid
		}
	}
	return 0
}

// StartPerf records call graphs (perf record -g) of each named process
// into dir/<tag>-<name>.perf.data until the returned func runs; a pid of
// 0 is skipped. It needs perf, and the right to trace those processes.
func StartPerf(dir, tag string, pids map[string]int) func() {
	_ = os.MkdirAll(dir, 0o755)
	var cmds []*exec.Cmd
	for name, pid := range pids {
		if pid == 0 {
			continue
		}
		out := filepath.Join(dir, fmt.Sprintf("%s-%s.perf.data", tag, name))
		c := exec.Command("perf", "record", "-q", "-F", "999", "-g", "-o", out, "-p", strconv.Itoa(pid))
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
