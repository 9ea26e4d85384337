package agent

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Bounds of the exchanges with a guest's silkd. A guest is untrusted: it
// may stop answering, answer forever, or send frames at the cap, and none
// of that may hold a session, a socket or memory of the node for longer
// or more than these.
const (
	// ControlTimeout bounds one control exchange (the control
	// connection's dial and info, then kill, pty_resize or ps): a guest
	// that never answers costs a session at most this long to kill.
	ControlTimeout = 10 * time.Second
	// DrainTimeout bounds the reads of a session that is ending (its
	// client went away, or its command was killed): what the guest still
	// sends is read and dropped for at most this long, then the
	// connection is closed.
	DrainTimeout = 2 * time.Second
	// DefaultBufferBudget is the node-wide bytes of guest frames the
	// agent relay may hold at once (New's budget).
	DefaultBufferBudget = 64 << 20
	// minBufferBudget fits one frame at the cap with its decoded
	// payload (maxFrameHold), so that any frame can be read at all.
	minBufferBudget = 2 * MaxFrame
	// frameBufRetained is how large each of a connection's two frame
	// buffers (the line, and its decoded data) may stay between frames
	// without charging the budget; a larger one is dropped on Release.
	frameBufRetained = 64 << 10
)

// maxFrameHold is the most one frame holds: its line (MaxFrame) and
// its base64 payload decoded (at most 3/4 of the line).
const maxFrameHold = MaxFrame + MaxFrame*3/4

// byteBudget is the node's budget for guest frames: bytes are acquired
// before they are held and released once the frame is written to the
// client, so a session past the budget waits (backpressure, bounded by
// its context) instead of allocating.
type byteBudget struct {
	sem  *semaphore.Weighted
	held atomic.Int64
}

func newByteBudget(n int64) *byteBudget {
	if n <= 0 {
		n = DefaultBufferBudget
	}
	return &byteBudget{sem: semaphore.NewWeighted(max(n, minBufferBudget))}
}

// acquire takes n bytes, waiting while the budget is used up; ctx ending
// gives up. A nil budget (tests, benchmarks) counts nothing.
func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	if b == nil || n <= 0 {
		return nil
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		return err
	}
	b.held.Add(n)
	return nil
}

func (b *byteBudget) release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.held.Add(-n)
	b.sem.Release(n)
}

// BufferHeld is how many bytes of guest frames the node holds right now,
// out of New's budget.
func (c *Client) BufferHeld() int64 { return c.budget.held.Load() }
