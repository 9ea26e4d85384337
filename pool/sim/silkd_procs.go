package sim

import (
	"context"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool/agent"
)

// The emulated silkd's process table: what each process is, the output it
// keeps for logs and attach, and how processes start, end and are listed.

// proc is one process in the table.
type proc struct {
	pid      int
	argv     []string
	detached bool
	started  time.Time
	cancel   context.CancelFunc
	done     chan struct{} // closed at exit
	resize   func(cols, rows int) error

	mu     sync.Mutex
	code   int
	killed bool
	ring   []byte // output, of which the last ringSize bytes count (see record)
	subs   map[chan []byte]struct{}
	exitAt time.Time
}

func (p *proc) record(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The ring runs up to twice ringSize before its head is cut, so that
	// a stream's bytes are copied into it about twice, not a whole ring
	// per write.
	if len(b) >= ringSize {
		p.ring = append(p.ring[:0], b[len(b)-ringSize:]...)
	} else {
		if len(p.ring)+len(b) > 2*ringSize {
			p.ring = p.ring[:copy(p.ring, p.ring[len(p.ring)-ringSize:])]
		}
		p.ring = append(p.ring, b...)
	}
	for ch := range p.subs {
		select {
		case ch <- slices.Clone(b):
		default: // a follower that cannot keep up misses output
		}
	}
}

// tail is a copy of the last ringSize bytes of output (p.mu held).
func (p *proc) tail() []byte {
	return slices.Clone(p.ring[max(0, len(p.ring)-ringSize):])
}

// recorder copies what a process writes into its ring.
type recorder struct {
	p *proc
	w io.Writer
}

func (r recorder) Write(b []byte) (int, error) {
	r.p.record(b)
	if r.w == nil {
		return len(b), nil
	}
	return r.w.Write(b)
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// start adds a process to the table and runs body in its own goroutine;
// body returns the exit code.
func (g *silkGuest) start(argv []string, detached bool, body func(ctx context.Context, p *proc) int) *proc {
	ctx, cancel := context.WithCancel(context.Background())
	g.mu.Lock()
	g.nextPid++
	p := &proc{pid: g.nextPid + 100, argv: argv, detached: detached, started: time.Now(), cancel: cancel,
		done: make(chan struct{}), subs: map[chan []byte]struct{}{}}
	g.procs[p.pid] = p
	g.reap()
	g.mu.Unlock()
	go func() {
		code := body(ctx, p)
		p.mu.Lock()
		if p.killed {
			code = -1
		}
		p.code, p.exitAt = code, time.Now()
		p.mu.Unlock()
		cancel()
		close(p.done)
	}()
	return p
}

// reap drops processes that exited more than 5 minutes ago (g.mu held).
func (g *silkGuest) reap() {
	for pid, p := range g.procs {
		p.mu.Lock()
		old := !p.exitAt.IsZero() && time.Since(p.exitAt) > 5*time.Minute
		p.mu.Unlock()
		if old {
			delete(g.procs, pid)
		}
	}
}

func (g *silkGuest) proc(pid int) *proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.procs[pid]
}

// kill ends pid; killing a process that already exited succeeds.
func (g *silkGuest) kill(pid int) bool {
	p := g.proc(pid)
	if p == nil {
		return false
	}
	if p.running() {
		p.mu.Lock()
		p.killed = true
		p.mu.Unlock()
		p.cancel()
		if g.killed != nil {
			g.killed()
		}
	}
	return true
}

func (g *silkGuest) killAll() {
	g.mu.Lock()
	pids := make([]int, 0, len(g.procs))
	for pid := range g.procs {
		pids = append(pids, pid)
	}
	g.mu.Unlock()
	for _, pid := range pids {
		g.kill(pid)
	}
}

// table is the ps answer.
func (g *silkGuest) table() []agent.Proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]agent.Proc, 0, len(g.procs))
	for _, p := range g.procs {
		row := agent.Proc{Pid: p.pid, Argv: p.argv, Detached: p.detached, State: "running", StartedAt: p.started.Unix()}
		if !p.running() {
			p.mu.Lock()
			code := p.code
			p.mu.Unlock()
			row.State, row.ExitCode = "exited", &code
		}
		out = append(out, row)
	}
	slices.SortFunc(out, func(a, b agent.Proc) int { return a.Pid - b.Pid })
	return out
}
