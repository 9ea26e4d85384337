package pool_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// hungServer answers nothing until the test ends (hung), or sends its
// headers and then a byte at a time, never finishing the body (trickle).
func hungServer(t *testing.T, trickle bool) string {
	t.Helper()
	done := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if trickle {
			w.WriteHeader(http.StatusOK)
			for {
				if _, err := w.Write([]byte(" ")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-done:
					return
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done); ts.Close() })
	return ts.URL
}

// No sandboxd behaviour holds a caller past the attempt's deadline: not a
// server that never answers, not one that trickles its body. The timed-out
// attempt is a retryable transport error (for a claim: ambiguous).
func TestEveryAttemptIsBoundedByItsDeadline(t *testing.T) {
	for _, trickle := range []bool{false, true} {
		c, err := pool.NewClient(pool.ClientOptions{
			BaseURL: hungServer(t, trickle), Token: nodeToken,
			AttemptTimeout: 150 * time.Millisecond, ClaimTimeout: 300 * time.Millisecond,
			Retry: pool.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.CloseIdleConnections)
		// The caller's own bound is far looser: only the attempt's deadline
		// can make the call return in time.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		_, err = c.List(ctx, pool.ListOptions{})
		if err == nil || !pool.IsRetryable(err) {
			t.Errorf("trickle=%v: list err %v, want a retryable transport error", trickle, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("trickle=%v: list took %v with a 150ms attempt deadline", trickle, d)
		}
		start = time.Now()
		_, err = c.Claim(ctx, pool.ClaimRequest{Template: "default"})
		if err == nil || !pool.IsRetryable(err) {
			t.Errorf("trickle=%v: claim err %v, want a retryable (ambiguous) transport error", trickle, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("trickle=%v: claim took %v with a 300ms attempt deadline", trickle, d)
		}
	}
}
