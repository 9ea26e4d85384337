//go:build unix

package testkit

import (
	"syscall"
	"time"
)

// ProcessCPU is user+system CPU time used by this process so far. On a
// shared, loaded host wall-clock throughput depends on the neighbours; CPU
// time per operation much less, so benchmarks report it beside ns/op.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
