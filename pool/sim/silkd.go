package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The emulated guest daemon (silkd) of each sandbox: a process table, a
// scratch directory standing for the guest's filesystem, and the RPCs
// info, exec, pty_open, pty_resize, kill, attach, logs and ps. Commands
// run in-process (silkd_shell.go), pty_open runs the host's shell behind
// Config.GuestHostShell (silkd_pty.go).

// ringSize is how much output silkd keeps per process for logs and attach.
const ringSize = 256 << 10

// guestSet is every sandbox's guest, made on first use; close removes
// their scratch directories.
type guestSet struct {
	mu     sync.Mutex
	m      map[string]*silkGuest
	root   string // parent of the scratch directories, made on first use
	shell  bool   // Config.GuestHostShell
	killed func()
}

func (gs *guestSet) get(id string) (*silkGuest, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g := gs.m[id]; g != nil {
		return g, nil
	}
	if gs.root == "" {
		d, err := os.MkdirTemp("", "sandboxd-sim-guests-")
		if err != nil {
			return nil, err
		}
		gs.root = d
	}
	dir := filepath.Join(gs.root, id)
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, err
	}
	if gs.m == nil {
		gs.m = map[string]*silkGuest{}
	}
	g := &silkGuest{root: dir, hostShell: gs.shell, procs: map[int]*proc{}, killed: gs.killed}
	gs.m[id] = g
	return g, nil
}

// lookup is id's guest if it was ever reached.
func (gs *guestSet) lookup(id string) *silkGuest {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.m[id]
}

func (gs *guestSet) close() {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for _, g := range gs.m {
		g.killAll()
	}
	if gs.root != "" {
		_ = os.RemoveAll(gs.root)
	}
}

// silkGuest is one sandbox's silkd.
type silkGuest struct {
	root      string // the guest's "/"
	hostShell bool
	killed    func() // counts a kill of a running process

	hostile hostility // hostile.go

	mu      sync.Mutex
	nextPid int
	procs   map[int]*proc
}

// serve answers RPCs on c: one on proto 1, back to back on proto 2.
func (g *silkGuest) serve(c *silkConn) {
	started := time.Now()
	if g.hostile.mode() == HostileNeverClose {
		ignore(c)
		return
	}
	for {
		req, err := c.recv()
		if err != nil {
			return
		}
		if req.V != 1 {
			_ = c.fail("bad_request", fmt.Sprintf("unsupported protocol version %d", req.V))
		} else if !g.rpc(c, req, started) {
			return
		}
		if c.proto < 2 {
			return
		}
	}
}

// rpc serves one request; false means the connection is over.
func (g *silkGuest) rpc(c *silkConn, req *silkReq, started time.Time) bool {
	switch req.Op {
	case "info":
		if g.hostile.mode() == HostileSilentNoInfo {
			ignore(c)
			return false
		}
		g.mu.Lock()
		n := len(g.procs)
		g.mu.Unlock()
		return c.send(map[string]any{"type": "info", "version": "sim", "proto": c.proto,
			"uptime_secs": int(time.Since(started).Seconds()), "procs": n, "sessions": 0}) == nil
	case "exec":
		if m := g.hostile.mode(); m != "" {
			return g.hostileExec(c, req, m)
		}
		return g.exec(c, req)
	case "pty_open":
		return g.ptyOpen(c, req)
	case "pty_resize":
		p := g.proc(req.Pid)
		if p == nil || p.resize == nil {
			return c.fail("not_found", fmt.Sprintf("no pty %d", req.Pid)) == nil
		}
		if err := p.resize(req.Cols, req.Rows); err != nil {
			return c.fail("internal", err.Error()) == nil
		}
		return c.send(map[string]any{"type": "done"}) == nil
	case "kill":
		if !g.kill(req.Pid) {
			return c.fail("not_found", fmt.Sprintf("no process %d", req.Pid)) == nil
		}
		return c.send(map[string]any{"type": "done"}) == nil
	case "ps":
		return c.send(map[string]any{"type": "procs", "procs": g.table()}) == nil
	case "logs", "attach":
		return g.follow(c, req.Pid, req.Op == "attach")
	}
	return c.fail("unimplemented", "unknown op "+req.Op) == nil
}

// exec runs argv with the connection's stdin frames as its input. The
// process is bound to the connection only through its output: as in
// silkd, a client that drops is noticed when a write fails, so a silent
// child runs on until it is killed.
func (g *silkGuest) exec(c *silkConn, req *silkReq) bool {
	switch {
	case len(req.Argv) == 0 || req.Argv[0] == "":
		return c.fail("bad_request", "argv is empty") == nil
	case !streamKnown(req.Argv):
		return c.fail("bad_request", "command not found: "+req.Argv[0]) == nil
	}
	stdinR, stdinW := io.Pipe()
	// As in silkd, started comes before any output: the command runs only
	// once the frame naming its pid is sent.
	begun := make(chan struct{})
	p := g.start(req.Argv, req.Detach, func(ctx context.Context, p *proc) int {
		<-begun
		context.AfterFunc(ctx, func() { _ = stdinR.CloseWithError(errors.New("killed")) })
		var stdout, stderr io.Writer = recorder{p, nil}, recorder{p, nil}
		if !req.Detach {
			stdout, stderr = recorder{p, output{c, "stdout"}}, recorder{p, output{c, "stderr"}}
		}
		stdout, stderr = ctxWriter{ctx, stdout}, ctxWriter{ctx, stderr}
		st := &stream{ctx: ctx, root: g.root, cwd: req.Cwd, env: req.Env, stdin: stdinR, stdout: stdout, stderr: stderr}
		return st.run(req.Argv)
	})
	err := c.send(map[string]any{"type": "started", "pid": p.pid})
	close(begun)
	if err != nil {
		return false
	}
	if req.Detach {
		_ = stdinW.Close()
		return true
	}
	fed := make(chan struct{})
	go func() { defer close(fed); g.feed(c, stdinW) }()
	<-p.done
	p.mu.Lock()
	code := p.code
	p.mu.Unlock()
	if c.send(map[string]any{"type": "exit", "code": code}) != nil {
		return false
	}
	if c.proto < 2 {
		return false // the connection ends with its one RPC; feed ends with it
	}
	<-fed // the connection's next request, or its end
	return true
}

// feed passes stdin frames to w until stdin_close, another request (kept
// for the connection's next RPC) or the connection's end. Input after the
// process ended is dropped.
func (g *silkGuest) feed(c *silkConn, w *io.PipeWriter) {
	defer w.Close()
	for {
		req, err := c.recv()
		if err != nil {
			return
		}
		switch req.Op {
		case "stdin":
			if _, err := w.Write(req.Data); err != nil {
				// The process no longer reads: drop input until the RPC ends.
				continue
			}
		case "stdin_close":
			_ = w.Close()
		default:
			c.next = req
			return
		}
	}
}

// follow is logs (the ring, then done) and attach (the ring, then live
// output, then exit; done if the process is gone).
func (g *silkGuest) follow(c *silkConn, pid int, live bool) bool {
	p := g.proc(pid)
	if p == nil {
		return c.fail("not_found", fmt.Sprintf("no process %d", pid)) == nil
	}
	ch := make(chan []byte, 256)
	p.mu.Lock()
	ring := p.tail()
	if live {
		p.subs[ch] = struct{}{}
	}
	p.mu.Unlock()
	defer func() { p.mu.Lock(); delete(p.subs, ch); p.mu.Unlock() }()
	out := output{c, "stdout"}
	if _, err := out.Write(ring); err != nil {
		return false
	}
	if !live {
		return c.send(map[string]any{"type": "done"}) == nil
	}
	for {
		select {
		case b := <-ch:
			if _, err := out.Write(b); err != nil {
				return false
			}
		case <-p.done:
			for len(ch) > 0 {
				if _, err := out.Write(<-ch); err != nil {
					return false
				}
			}
			p.mu.Lock()
			code := p.code
			p.mu.Unlock()
			return c.send(map[string]any{"type": "exit", "code": code}) == nil
		}
	}
}
