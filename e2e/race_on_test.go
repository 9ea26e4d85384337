//go:build race

package e2e

// raceBinary: the race-instrumented test run also builds vk-sandbox with
// -race, so the binary's own concurrency is checked end to end.
const raceBinary = true
