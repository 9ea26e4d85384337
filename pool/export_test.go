package pool

import "time"

// The pool_test tests that read these run against pool/sim, which imports
// pool, so they cannot move into package pool: these wrappers give them the
// unexported readers without exporting them from the package.

// RetryAfter is retryAfter, for the pool_test tests.
func RetryAfter(err error) time.Duration { return retryAfter(err) }

// Redirects is redirects, for the pool_test tests.
func Redirects(err error) []string { return redirects(err) }
