//go:build unix

package pipeline_test

import (
	"syscall"
	"time"
)

// processCPU is user+system CPU time used by this process so far. On a
// shared, loaded host wall-clock throughput depends on the neighbours;
// CPU time per claim does not.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
