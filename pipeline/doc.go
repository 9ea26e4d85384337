// Package pipeline is the claim transaction engine: it turns Pod intents
// into sandboxd claims that are durable before anyone sees them Running
// (the rule, and where it is kept, is at Engine.publishRunning).
//
// Shape. Intents fan into N shards chosen by hash(Pod UID). A shard is a
// client-go workqueue with W workers; the queue item is the UID and the
// intent (the newest Pod spec for that UID) sits beside it. The ordering
// guarantee of a UID is stated at the shard type. Different generations
// (UIDs) of one pod key are serialised by that key's own lock, so a
// delete of the old Pod and an adoption by the new one never overlap.
//
// One record per pod key (record.go) holds that lock and everything memory
// knows about the key beside its durable row: its current generation, a
// tentative claim, the quarantine, unsettled and detached marks, the
// lifetime its Pod asked for and the lease watch's backoff. One lock rule
// covers them (stated at records), and every change to them is in
// transitions.go.
//
// Claim states (docs/design.md, "Claim states"):
//
//	none ──claim──▶ tentative ──fsync──▶ durable ──push──▶ Running
//	                    │                   ▲
//	        commit fails│                   │ listing vouches
//	                    ▼                   │
//	       release (rollback)          quarantined (loaded from disk)
//
// Tentative rows exist only in memory. They are releasable and never
// Running; a Pod of the same owner takes one over only by retrying its
// commit. Quarantined rows were loaded from the state file and no
// sandboxd listing has vouched for them yet: releasable, not adoptable, not
// Running. Durable rows live in the store, which is the authority. The
// marks are described at keyState.
//
// The pipeline speaks of pod keys, UIDs and claims. It never sees a
// corev1.Pod: the kube package renders status through the Reporter.
package pipeline
