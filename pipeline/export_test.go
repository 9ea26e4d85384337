package pipeline

import "github.com/cocoonstack/vk-sandbox/pool"

// NumRequeues is the rate limiter's failure count for uid in its shard.
// It stays a test hook: a failure count the workqueue keeps per UID has no
// outside view (its metrics count retries, not what is still remembered),
// and a Pod deleted while it was retrying must leave none behind.
func (e *Engine) NumRequeues(uid string) int { return e.shardFor(uid).q.NumRequeues(uid) }

// The external tests (package pipeline_test) drive the engine through
// these: the production code has no caller outside this package for them.

// Shutdown stops intake and waits for the workers (Engine.shutdown).
func (e *Engine) Shutdown() { e.shutdown() }

// Verified is closed once no quarantined row remains.
func (e *Engine) Verified() <-chan struct{} { return e.verified }

// Listed is closed once the startup listing has succeeded.
func (e *Engine) Listed() <-chan struct{} { return e.listed }

// Selector and LooksLike are Identity.selector and Identity.looksLike.
func (id Identity) Selector(key PodKey, uid string) (pool.ListOptions, error) {
	return id.selector(key, uid)
}

func (id Identity) LooksLike(s pool.Sandbox, root bool) bool { return id.looksLike(s, root) }

// The labels a claim carries at sandboxd (Identity.Labels).
const (
	LabelManagedBy = labelManagedBy
	LabelNode      = labelNode
	LabelPodUID    = labelPodUID
	LabelOwnerUID  = labelOwnerUID
	ManagedBy      = managedBy
)
