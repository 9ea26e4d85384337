package pipeline

// NumRequeues is the rate limiter's failure count for uid in its shard.
// It stays a test hook: a failure count the workqueue keeps per UID has no
// outside view (its metrics count retries, not what is still remembered),
// and a Pod deleted while it was retrying must leave none behind.
func (e *Engine) NumRequeues(uid string) int { return e.shardFor(uid).q.NumRequeues(uid) }
