package store

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockHolder names the process holding the flock on f, from /proc/locks
// ("pid 1234 (vk-sandbox)"), or returns "" when it cannot tell (another
// mount namespace, no /proc). It is only for the operator's error message:
// the lock itself is the flock, never this lookup.
func lockHolder(f *os.File) string {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return ""
	}
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return ""
	}
	// /proc/locks writes the device as major:minor in hex, then the inode.
	major := (st.Dev>>8)&0xfff | (st.Dev>>32)&^0xfff
	minor := st.Dev&0xff | (st.Dev>>12)&^0xff
	id := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	for _, l := range strings.Split(string(data), "\n") {
		// "1: FLOCK  ADVISORY  WRITE 1234 00:2e:5678 0 EOF"; a waiter has "->" after the number.
		fs := strings.Fields(l)
		if len(fs) < 6 || fs[1] != "FLOCK" || fs[5] != id {
			continue
		}
		pid, err := strconv.Atoi(fs[4])
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if c := strings.TrimSpace(string(comm)); c != "" {
			return fmt.Sprintf("pid %d (%s)", pid, c)
		}
		return fmt.Sprintf("pid %d", pid)
	}
	return ""
}
