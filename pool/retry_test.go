package pool_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestRetryHonoursRetryAfterOn503(t *testing.T) {
	h := newHarness(t, sim.Config{})
	obs := &statuses{}
	c := h.client(rootToken, func(o *pool.ClientOptions) { o.Observer = obs })
	h.sim.InjectFault(sim.Fault{Verb: "list", Mode: "503", Count: 1, RetryAfter: time.Second})

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	spanCtx, span := tp.Tracer("test").Start(ctx(t), "lease-watch")

	start := time.Now()
	_, err := c.List(spanCtx, pool.ListOptions{})
	span.End()
	if h.err(err) != nil {
		t.Fatalf("list: %v", err)
	}
	// The backoff alone would have waited ~5ms; Retry-After says 1s.
	if d := time.Since(start); d < time.Second {
		t.Errorf("retried after %v, want at least the 1s Retry-After", d)
	}
	if got := obs.list(); !slices.Equal(got, []int{503, 200}) {
		t.Errorf("attempts %v, want [503 200]", got)
	}
	var events []string
	for _, s := range rec.Ended() {
		if s.Name() == "lease-watch" {
			for _, e := range s.Events() {
				events = append(events, e.Name)
			}
		}
	}
	if !slices.Equal(events, []string{"sandboxd.retry"}) {
		t.Errorf("span events %v, want one sandboxd.retry", events)
	}
}

func TestListRetriedAfter500ThenSucceeds(t *testing.T) {
	h := newHarness(t, sim.Config{})
	h.claim("ns/a", 60)
	h.sim.InjectFault(sim.Fault{Verb: "list", Mode: "500", Count: 2})
	rows, err := h.node.List(ctx(t), pool.ListOptions{})
	if h.err(err) != nil || len(rows) != 1 {
		t.Fatalf("list: %d rows, %v", len(rows), err)
	}
	if n := h.count("list"); n != 3 {
		t.Errorf("lists sent = %d, want 3", n)
	}
}

func Test4xxIsNeverRetried(t *testing.T) {
	h := newHarness(t, sim.Config{})
	for _, mode := range []string{"409", "429"} {
		h.sim.InjectFault(sim.Fault{Verb: "info", Mode: mode, Count: 1})
		_, err := h.root.Info(ctx(t))
		h.err(err)
		if err == nil || pool.IsRetryable(err) {
			t.Errorf("%s: err %v, want a non-retryable error", mode, err)
		}
	}
	if n := h.count("info"); n != 2 {
		t.Errorf("infos sent = %d, want 2 (one per fault)", n)
	}
}

func TestRetriesAreBoundedByMaxAttempts(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.client(rootToken, func(o *pool.ClientOptions) { o.Retry.MaxAttempts = 3 })
	h.sim.InjectFault(sim.Fault{Verb: "info", Mode: "500"})
	_, err := c.Info(ctx(t))
	assertStatus(t, h.err(err), http.StatusInternalServerError)
	if n := h.count("info"); n != 3 {
		t.Errorf("infos sent = %d, want 3", n)
	}
}

func TestRetriesAreBoundedByTheContextDeadline(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.client(rootToken, func(o *pool.ClientOptions) {
		o.Retry = pool.RetryPolicy{MaxAttempts: 1000, MaxElapsed: time.Minute, InitialInterval: 20 * time.Millisecond, MaxInterval: 50 * time.Millisecond}
	})
	h.sim.InjectFault(sim.Fault{Verb: "info", Mode: "503", RetryAfter: -1}) // no Retry-After: plain backoff
	cctx, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()

	start := time.Now()
	_, err := c.Info(cctx)
	h.err(err)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v, want about the 300ms deadline", d)
	}
	// Either the last 503 (the next wait would outlive the deadline) or the
	// context error: never success, never unbounded.
	if err == nil || (!errors.Is(err, context.DeadlineExceeded) && statusOf(err) != 503) {
		t.Errorf("err = %v", err)
	}
	if n := h.count("info"); n < 2 || n > 30 {
		t.Errorf("infos sent = %d, want a few", n)
	}
}

func TestRetryAfterBeyondTheDeadlineReturnsAtOnce(t *testing.T) {
	h := newHarness(t, sim.Config{})
	h.sim.InjectFault(sim.Fault{Verb: "info", Mode: "503", RetryAfter: 30 * time.Second})
	cctx, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()

	start := time.Now()
	_, err := h.root.Info(cctx)
	h.err(err)
	if d := time.Since(start); d > time.Second {
		t.Errorf("waited %v for a retry that could not happen before the deadline", d)
	}
	if pool.RetryAfter(err) != 30*time.Second {
		t.Errorf("RetryAfter(%v) = %v, want 30s so the caller can schedule", err, pool.RetryAfter(err))
	}
	if n := h.count("info"); n != 1 {
		t.Errorf("infos sent = %d, want 1", n)
	}
}

func TestRetryAfterBeyondMaxElapsedStops(t *testing.T) {
	h := newHarness(t, sim.Config{})
	c := h.client(rootToken, func(o *pool.ClientOptions) { o.Retry.MaxElapsed = 500 * time.Millisecond })
	h.sim.InjectFault(sim.Fault{Verb: "get", Mode: "503", RetryAfter: 2 * time.Second})
	start := time.Now()
	_, err := c.Get(ctx(t), "sb_x")
	assertStatus(t, h.err(err), http.StatusServiceUnavailable)
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v, want a prompt stop", d)
	}
}

func TestCallerCancellationIsNotRetryable(t *testing.T) {
	h := newHarness(t, sim.Config{})
	h.sim.InjectFault(sim.Fault{Verb: "list", Mode: "slow", Delay: 5 * time.Second})
	cctx, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	defer cancel()
	_, err := h.node.List(cctx, pool.ListOptions{})
	h.err(err)
	if !errors.Is(err, context.DeadlineExceeded) || pool.IsRetryable(err) {
		t.Fatalf("err = %v: want DeadlineExceeded and not retryable", err)
	}
	if n := h.count("list"); n != 1 {
		t.Errorf("lists sent = %d, want 1", n)
	}
}

func TestObserverSeesEveryAttemptWithZeroForTransportErrors(t *testing.T) {
	h := newHarness(t, sim.Config{})
	obs := &statuses{}
	c := h.client(rootToken, func(o *pool.ClientOptions) { o.Observer = obs })
	h.sim.InjectFault(sim.Fault{Verb: "info", Mode: "reset", Count: 1})
	h.sim.InjectFault(sim.Fault{Verb: "info", Mode: "500", Count: 1})
	if _, err := c.Info(ctx(t)); h.err(err) != nil {
		t.Fatal(err)
	}
	if got := obs.list(); !slices.Equal(got, []int{0, 500, 200}) {
		t.Errorf("attempts %v, want [0 500 200]", got)
	}
}

// statusOf is the HTTP status carried by err, or 0.
func statusOf(err error) int {
	var he *pool.HTTPError
	if errors.As(err, &he) {
		return he.Status
	}
	return 0
}
