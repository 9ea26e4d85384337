package telemetry

import (
	"context"
	"time"
)

// SandboxdObserver adapts Metrics to the sandboxd client's observer, whose
// Request has no ctx (so these measurements carry no exemplar).
type SandboxdObserver struct{ m *Metrics }

// Request records one sandboxd call; see Metrics.SandboxdRequest.
func (o SandboxdObserver) Request(verb string, status int, d time.Duration) {
	o.m.SandboxdRequest(context.Background(), verb, status, d)
}

// SandboxdObserver returns the adapter for pool's sandboxd client.
func (m *Metrics) SandboxdObserver() SandboxdObserver { return SandboxdObserver{m} }

// StoreObserver adapts Metrics to the claim store's observer.
type StoreObserver struct{ m *Metrics }

// Commit records one group commit; see Metrics.StoreCommit.
func (o StoreObserver) Commit(batch int, bytes int, fsync time.Duration) {
	o.m.StoreCommit(batch, bytes, fsync)
}

// Compact records one compaction of the state file; see
// Metrics.StoreCompaction.
func (o StoreObserver) Compact(records int, took time.Duration, err error) {
	o.m.StoreCompaction(took, err == nil)
}

// StoreObserver returns the adapter for pool's claim store.
func (m *Metrics) StoreObserver() StoreObserver { return StoreObserver{m} }
