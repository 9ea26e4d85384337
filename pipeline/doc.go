// Package pipeline is the claim transaction engine: it turns Pod intents
// into sandboxd claims that are durable before anyone sees them Running.
//
// Shape. Intents fan into N shards chosen by hash(Pod UID). A shard is a
// client-go workqueue with W workers; the queue item is the UID and the
// intent (the newest Pod spec for that UID) sits beside it. Ordering
// guarantee, stated once: a UID is never processed by two workers at once,
// and an intent recorded while its UID is being processed is processed
// again afterwards (the workqueue's dirty/processing rule). Different
// generations (UIDs) of one pod key are serialised by a striped key lock,
// so a delete of the old Pod and an adoption by the new one never overlap.
//
// Claim states (the claim transaction (docs/pod-contract.md)):
//
//	none ──claim──▶ tentative ──fsync──▶ durable ──push──▶ Running
//	                    │                   ▲
//	        commit fails│                   │ listing vouches
//	                    ▼                   │
//	       release (rollback)          quarantined (loaded from disk)
//
// Tentative rows exist only in memory: never Running, never adopted, but
// releasable. Quarantined rows were loaded from the state file and no
// sandboxd listing has vouched for them yet: releasable, not adoptable, not
// Running. Durable rows live in the store, which is the authority.
//
// The pipeline speaks of pod keys, UIDs and claims. It never sees a
// corev1.Pod: the kube package renders status through the Reporter.
package pipeline
