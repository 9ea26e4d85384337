//go:build !unix

package testkit

import "time"

// ProcessCPU is not measured here: a CPU-per-operation metric reads 0.
func ProcessCPU() time.Duration { return 0 }
