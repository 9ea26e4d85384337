package podload

import (
	"context"
	"sync"
	"time"
)

// Every calls take now and then every interval until ctx ends, and once
// more when it ends. The returned func waits for that last call and
// returns every value taken, in order.
func Every[T any](ctx context.Context, interval time.Duration, take func() T) func() []T {
	var (
		mu  sync.Mutex
		out []T
	)
	add := func() {
		v := take()
		mu.Lock()
		out = append(out, v)
		mu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				add()
				return
			case <-tick.C:
				add()
			}
		}
	}()
	return func() []T { <-done; mu.Lock(); defer mu.Unlock(); return out }
}
