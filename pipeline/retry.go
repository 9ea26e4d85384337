package pipeline

import (
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// defaultClaimRetry bounds the retries of one sandboxd claim inside a
// transaction, on the schedule every sandboxd call uses (pool.BackOff):
// 1 try + 3 retries, 25ms to 1s apart, 10s in all, a Retry-After waited out.
// Config.ClaimRetry's zero fields take these values.
var defaultClaimRetry = pool.RetryPolicy{MaxAttempts: 4, MaxElapsed: 10 * time.Second, InitialInterval: 25 * time.Millisecond, MaxInterval: time.Second}
