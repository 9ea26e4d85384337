package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// refusalMemory is how long a sandbox whose node refused the agent
// upgrade is not asked again: a node (or a policy in front of it) without
// the relay answers the same way every time, and an upgraded sandboxd is
// noticed after this long.
const refusalMemory = time.Minute

// ErrNoRelay is an agent upgrade the node refused as a whole (no such
// route, no upgrades allowed): the buffered exec is the only way in.
var ErrNoRelay = errors.New("sandboxd does not relay to the guest agent")

// noRelay reports whether an upgrade answer says the relay is not there
// rather than that this request was wrong: a 404 (the route, or the
// sandbox, is unknown: the buffered exec then says which), 405, 426, 501,
// or a success that did not switch protocols.
func noRelay(status int) bool {
	switch status {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusUpgradeRequired, http.StatusNotImplemented:
		return true
	}
	return status >= 200 && status < 300
}

// Client is the sandboxd client with the agent relay: the claim client's
// calls (embedded, so a Client serves wherever a *pool.Client does), and
// the node-wide state of the relay, the refused upgrades and the byte
// budget of guest frames. It is safe for concurrent use.
type Client struct {
	*pool.Client
	// refused holds, per sandbox id, when its node last refused the
	// agent upgrade (see Dial).
	refused sync.Map
	// budget is the node's budget for guest frames (budget.go).
	budget *byteBudget
}

// New gives c the agent relay. budget bounds the bytes of guest frames
// (kubectl exec output read off the relay) the node holds at once, over
// all sessions: a session past it waits for bytes to be written out. 0 or
// less means DefaultBufferBudget; less than two frames at the cap
// (16 MiB) is raised to that.
func New(c *pool.Client, budget int64) *Client {
	return &Client{Client: c, budget: newByteBudget(budget)}
}

// Dial opens the agent relay of sandbox id (GET /v1/sandboxes/{id}/agent,
// Upgrade: silkd) with the sandbox's own token: from the 101 on, the
// connection speaks silkd's protocol. An answer that says the node has no
// relay comes back wrapping ErrNoRelay (and is remembered for the sandbox
// for a minute, so that a node without it costs one refused upgrade, not
// one per command); other refusals are *pool.HTTPError, as for the other
// calls.
func (c *Client) Dial(ctx context.Context, id, token string) (*relayConn, error) {
	if id == "" {
		return nil, errors.New("sandboxd agent: empty sandbox id")
	}
	if t, ok := c.refused.Load(id); ok && time.Since(t.(time.Time)) < refusalMemory {
		return nil, fmt.Errorf("sandboxd agent %s: %w (remembered)", id, ErrNoRelay)
	}
	pc, status, err := c.DialUpgrade(ctx, pool.VerbAgent, id, token, "/v1/sandboxes/"+url.PathEscape(id)+"/agent", "silkd")
	if err != nil {
		if noRelay(status) {
			c.rememberRefusal(id)
			return nil, fmt.Errorf("%w: %w", ErrNoRelay, err)
		}
		return nil, err
	}
	c.refused.Delete(id)
	return newConn(pc, pc.Reader(), c.budget), nil
}

// rememberRefusal notes a refused upgrade, and forgets those older than
// refusalMemory, so that the set never outgrows a minute's worth.
func (c *Client) rememberRefusal(id string) {
	now := time.Now()
	c.refused.Range(func(k, v any) bool {
		if now.Sub(v.(time.Time)) >= refusalMemory {
			c.refused.Delete(k)
		}
		return true
	})
	c.refused.Store(id, now)
}

// Agent is silkd in one sandbox. Each streaming RPC (exec, pty, attach)
// has a connection of its own; the short ones (kill, pty_resize, ps) go
// over a control connection, which is kept for the next one only when
// silkd speaks proto 2 (learnt from info on the first one). Call Close
// when done.
type Agent struct {
	c         *Client
	id, token string

	mu    sync.Mutex
	ctl   *relayConn // an idle proto-2 control connection, or nil
	proto int        // silkd's proto once info told it, else 0
}

// Agent returns the guest agent of sandbox id, reached with its token.
func (c *Client) Agent(id, token string) *Agent { return &Agent{c: c, id: id, token: token} }

// Close drops the idle control connection.
func (a *Agent) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctl != nil {
		_ = a.ctl.Close()
		a.ctl = nil
	}
}

// call runs one short RPC and returns its terminal frame. On proto 1 the
// connection serves that RPC only; on proto 2 it is kept for the next.
//
// The whole exchange (dial, info, the RPC) is bounded by ControlTimeout
// as well as ctx: a guest that answers neither info nor the RPC holds
// a.mu, and whoever kills a session through it, no longer than that.
func (a *Agent) call(ctx context.Context, req any) (frame, error) {
	ctx, cancel := context.WithTimeout(ctx, ControlTimeout)
	defer cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	conn := a.ctl
	a.ctl = nil
	if conn == nil {
		var err error
		if conn, err = a.controlConn(ctx); err != nil {
			return frame{}, err
		}
	}
	stop := conn.bound(ctx)
	f, err := roundTrip(ctx, conn, req)
	conn.release() // a control answer is read, not passed on
	if !stop() || err != nil {
		_ = conn.Close()
		return f, errors.Join(ctx.Err(), err)
	}
	if a.proto >= 2 {
		_ = conn.conn.SetDeadline(time.Time{}) // idle until the next call bounds it
		a.ctl = conn
	} else {
		_ = conn.Close()
	}
	return f, nil
}

// controlConn dials a connection for short RPCs (a.mu held), within
// ctx. The first one asks info, and keeps that connection if proto >= 2;
// an older silkd closes it after info, so the RPC dials again.
func (a *Agent) controlConn(ctx context.Context) (*relayConn, error) {
	conn, err := a.c.Dial(ctx, a.id, a.token)
	if err != nil || a.proto != 0 {
		return conn, err
	}
	stop := conn.bound(ctx)
	f, err := roundTrip(ctx, conn, op("info"))
	conn.release()
	if !stop() || err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("silkd info: %w", errors.Join(ctx.Err(), err))
	}
	a.proto = max(f.Proto, 1)
	if f.Proto >= 2 {
		return conn, nil
	}
	_ = conn.Close()
	return a.c.Dial(ctx, a.id, a.token)
}

// roundTrip sends req and reads up to its terminal frame; the caller has
// bounded conn.
func roundTrip(ctx context.Context, conn *relayConn, req any) (frame, error) {
	if err := conn.send(req); err != nil {
		return frame{}, err
	}
	for {
		f, err := conn.recv(ctx)
		if err != nil {
			return frame{}, err
		}
		if end, ferr := f.terminal(); end {
			return f, ferr
		}
	}
}

// Kill sends SIGKILL to pid; killing a process that already ended is not
// an error.
func (a *Agent) Kill(ctx context.Context, pid int) error {
	_, err := a.call(ctx, agentPidOp{agentOp: op("kill"), Pid: pid})
	return err
}

// Resize sets the size of pty pid's terminal.
func (a *Agent) Resize(ctx context.Context, pid, cols, rows int) error {
	_, err := a.call(ctx, agentPidOp{agentOp: op("pty_resize"), Pid: pid, Cols: cols, Rows: rows})
	return err
}

// Ps lists silkd's process table.
func (a *Agent) Ps(ctx context.Context) ([]Proc, error) {
	f, err := a.call(ctx, op("ps"))
	if err != nil {
		return nil, err
	}
	var procs []Proc
	if f.Type != "procs" || len(f.Procs) == 0 {
		return nil, fmt.Errorf("silkd ps: answered %q", f.Type)
	}
	if err := json.Unmarshal(f.Procs, &procs); err != nil {
		return nil, fmt.Errorf("silkd ps: %w", err)
	}
	return procs, nil
}
