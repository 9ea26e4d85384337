package sim

import (
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// guest is the emulated inside of a sandbox: whether the node can reach it
// and how much memory it uses. The row's Hibernated and Failed flags are
// the rest of its state.
type guest struct {
	unreachable bool
	memUsed     int64 // valid when memSet
	memSet      bool
}

// update applies fn to id's row under the lock and reports whether the
// row exists.
func (ix *index) update(id string, fn func(*row)) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	r := ix.rows[id]
	if r == nil {
		return false
	}
	fn(r)
	ix.dirty = true
	return true
}

// wake ends a hibernation, as activity (an exec, or a relay with the
// sandbox's own token) does on real sandboxd.
func (ix *index) wake(id string) {
	ix.update(id, func(r *row) { r.sb.Hibernated = false })
}

// stats is the row's answer to GET .../stats. A hibernated sandbox has no
// VMM process to read, so its memory is unmeasured rather than zero. An
// awake guest uses what SetMemUsed set, or a quarter of its memory.
func (r row) stats(now time.Time) pool.Stats {
	st := pool.Stats{
		ID: r.sb.ID, CPUCount: r.sb.CPUCount, MemTotalBytes: r.sb.MemTotalBytes,
		Hibernated: r.sb.Hibernated, MeasuredAt: now.UTC().Truncate(time.Millisecond),
	}
	if !r.sb.Hibernated {
		st.MemUsedMeasured = true
		st.MemUsedBytes = r.sb.MemTotalBytes / 4
		if r.guest.memSet {
			st.MemUsedBytes = r.guest.memUsed
		}
	}
	return st
}

// Hibernate pauses a sandbox, as the node's idle policy would: its stats
// are unmeasured, a passive (root) relay answers 409, and an exec or a
// relay with the sandbox's token wakes it. It reports whether it exists.
func (s *Server) Hibernate(id string) bool {
	return s.ix.update(id, func(r *row) { r.sb.Hibernated = true })
}

// Fail marks a sandbox failed: exec and the ports relay answer 409. It
// reports whether the sandbox exists.
func (s *Server) Fail(id string) bool {
	return s.ix.update(id, func(r *row) { r.sb.Failed = true })
}

// SetGuestUnreachable makes the node lose (or regain) its guest agent:
// exec and the ports relay answer 502. It reports whether it exists.
func (s *Server) SetGuestUnreachable(id string, down bool) bool {
	return s.ix.update(id, func(r *row) { r.guest.unreachable = down })
}

// SetMemUsed sets the memory an awake guest is measured to use. It reports
// whether the sandbox exists.
func (s *Server) SetMemUsed(id string, bytes int64) bool {
	return s.ix.update(id, func(r *row) { r.guest.memUsed, r.guest.memSet = max(bytes, 0), true })
}

// guestAddr is the host address behind guest port p, if anything listens.
func (s *Server) guestAddr(p int) (string, bool) {
	if a, ok := s.cfg.GuestPorts[p]; ok {
		return a, true
	}
	if s.cfg.GuestLoopback {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), true
	}
	return "", false
}

func validGuestPorts(m map[int]string) error {
	for p, addr := range m {
		if p < 1 || p > 65535 {
			return fmt.Errorf("sim: guest port %d is not a TCP port", p)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("sim: guest port %d: address %q: %w", p, addr, err)
		}
	}
	return nil
}

// execBudget is the node's buffered-exec memory. A command holds its
// worst case, pool.MaxExecOutput, from start to answer.
type execBudget struct{ left atomic.Int64 }

func (b *execBudget) take(n int64) bool {
	for {
		cur := b.left.Load()
		if cur < n {
			return false
		}
		if b.left.CompareAndSwap(cur, cur-n) {
			return true
		}
	}
}

func (b *execBudget) give(n int64) { b.left.Add(n) }
