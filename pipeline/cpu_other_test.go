//go:build !unix

package pipeline_test

import "time"

// processCPU is not measured here; cpu-µs/claim then reads 0.
func processCPU() time.Duration { return 0 }
