// Package podload is the load side shared by the end-to-end harnesses
// (bench/burst, bench/fleet): it creates sandbox Pods with a bounded pool
// of client workers, follows them by watch until each is Running with a
// podIP, does the "bare" run (the same creates plus the same status writes
// from a plain client, no provider: the apiserver's own limit), and reads
// what a run costs from /proc and from the apiserver's /metrics.
package podload
