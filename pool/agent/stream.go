package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Exec is one command run through silkd with its streams: output
// reaches Stdout and Stderr as the guest writes it, and Stdin (nil: none)
// is forwarded as it arrives.
type Exec struct {
	Argv   []string
	Cwd    string
	Env    map[string]string
	Stdin  io.Reader
	Stdout io.Writer // nil discards
	Stderr io.Writer // nil discards
}

// PTY is a login shell in a pseudo-terminal (silkd's pty_open, which
// takes no argv). Typed is sent as the terminal's first input, before
// Stdin; Resize carries the terminal's new sizes.
type PTY struct {
	Cols, Rows int
	Cwd        string
	Env        map[string]string
	Typed      []byte
	Stdin      io.Reader
	Stdout     io.Writer // the terminal's output: stdout and stderr merged
	Resize     <-chan TermSize
}

// TermSize is a terminal's size in characters.
type TermSize struct{ Cols, Rows int }

// Exec runs r to its end and returns its exit code (-1: killed). When ctx
// ends first (the client went away, or its deadline passed), the command
// is killed through a second connection, since silkd would let a silent
// child run on, and ctx's error is returned.
func (a *Agent) Exec(ctx context.Context, r Exec) (int, error) {
	if len(r.Argv) == 0 {
		return 0, fmt.Errorf("silkd exec in %s: empty argv", a.id)
	}
	conn, err := a.c.Dial(ctx, a.id, a.token)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	req := agentExecOp{agentOp: op("exec"), Argv: r.Argv, Cwd: r.Cwd, Env: r.Env}
	return a.stream(ctx, conn, req, nil, r.Stdin, true, r.Stdout, r.Stderr, nil)
}

// PTY runs a shell in a terminal until it exits, and returns its exit
// code; ctx ending kills it, as for Exec.
func (a *Agent) PTY(ctx context.Context, r PTY) (int, error) {
	conn, err := a.c.Dial(ctx, a.id, a.token)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	req := agentPTYOp{agentOp: op("pty_open"), Cols: r.Cols, Rows: r.Rows, Cwd: r.Cwd, Env: r.Env}
	// A pty ignores stdin_close: the client's end of input is not passed on.
	return a.stream(ctx, conn, req, r.Typed, r.Stdin, false, r.Stdout, r.Stdout, r.Resize)
}

// Attach follows the output of process pid (what it printed so far, then
// live) until it exits. It returns the exit code, and exited false when
// the process was gone before it could say (silkd's done).
func (a *Agent) Attach(ctx context.Context, pid int, stdout, stderr io.Writer) (code int, exited bool, err error) {
	conn, err := a.c.Dial(ctx, a.id, a.token)
	if err != nil {
		return 0, false, err
	}
	defer conn.Close()
	// ctx ending interrupts a Recv blocked on the guest: attach only
	// reads, and nothing runs in the guest for it, so it just ends.
	stop := conn.bound(ctx)
	defer stop()
	if err := conn.send(agentPidOp{agentOp: op("attach"), Pid: pid}); err != nil {
		return 0, false, errors.Join(ctx.Err(), err)
	}
	for {
		f, err := conn.recv(ctx)
		if err != nil {
			return 0, false, errors.Join(ctx.Err(), err)
		}
		switch f.Type {
		case "stdout", "stderr":
			err := write(pick(f.Type, stdout, stderr), f.Data)
			conn.release() // written on: the node no longer holds it
			if err != nil {
				return 0, false, err
			}
		case "exit":
			return f.exitCode(), true, nil
		case "done":
			return 0, false, nil
		case "error":
			return 0, false, &Error{Kind: f.Kind, Message: f.Message}
		}
	}
}

func pick(typ string, stdout, stderr io.Writer) io.Writer {
	if typ == "stderr" {
		return stderr
	}
	return stdout
}

// write writes p to w, which is nil when nobody asked for the stream.
func write(w io.Writer, p []byte) error {
	if w == nil || len(p) == 0 {
		return nil
	}
	_, err := w.Write(p)
	return err
}

// stream runs one streaming RPC on conn: it sends req, waits for
// started{pid}, then forwards typed and stdin (ending it with stdin_close
// when closeStdin, never with a half-close: the relay would close the
// guest's side) and resizes, and copies output until exit. Nothing is
// held beyond one frame (charged to the node's budget until written on)
// and one stdin chunk.
//
// Whatever the guest does, once ctx ends the session is over within
// ControlTimeout (the kill) plus DrainTimeout (the last reads), and the
// resize pump has returned; the stdin pump returns once the caller's
// stream is closed, which the caller does when stream returns.
func (a *Agent) stream(ctx context.Context, conn *relayConn, req any, typed []byte, stdin io.Reader, closeStdin bool,
	stdout, stderr io.Writer, resize <-chan TermSize) (int, error) {
	// Until started names the pid there is nothing to kill, so ctx does
	// not cut that wait short: the attempt's deadline bounds it, and a ctx
	// that ended meanwhile kills the process at once.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.c.AttemptTimeout())
	stop := conn.bound(sctx)
	err := conn.send(req)
	var f frame
	if err == nil {
		f, err = conn.recv(sctx)
		conn.release()
	}
	stop()
	cancel()
	switch {
	case err != nil:
		return 0, errors.Join(ctx.Err(), err)
	case f.Type == "error":
		return 0, &Error{Kind: f.Kind, Message: f.Message}
	case f.Type != "started":
		return 0, fmt.Errorf("silkd in %s answered %q before started", a.id, f.Type)
	}
	pid := f.Pid
	// While the session is live, ctx bounds every read and write on conn.
	live, end := context.WithCancel(ctx)
	stop = conn.bound(live)
	var pumps sync.WaitGroup
	done := make(chan struct{})
	go a.pumpStdin(conn, typed, stdin, closeStdin, done)
	if resize != nil {
		pumps.Go(func() { a.pumpResize(live, pid, resize) })
	}
	code, err := copyOutput(ctx, conn, stdout, stderr)
	// The session is ending: the pumps stop sending, and a resize in
	// flight is cut short rather than hold the control connection that
	// the kill needs.
	close(done)
	end()
	pumps.Wait()
	stop()
	if err != nil {
		// The client left, the deadline passed, or the connection broke:
		// whatever it was, nothing may keep running in the guest for a
		// client that is gone. What the guest still sends is then read
		// for DrainTimeout at most.
		a.killDetached(pid)
		conn.drain()
		return 0, errors.Join(ctx.Err(), err)
	}
	return code, nil
}

// copyOutput copies output frames until exit, and returns the exit code.
// Each frame's bytes are given back to the node's budget once written.
func copyOutput(ctx context.Context, conn *relayConn, stdout, stderr io.Writer) (int, error) {
	for {
		f, err := conn.recv(ctx)
		if err != nil {
			return 0, err
		}
		switch f.Type {
		case "stdout", "stderr":
			err := write(pick(f.Type, stdout, stderr), f.Data)
			conn.release()
			if err != nil {
				return 0, fmt.Errorf("client stream: %w", err)
			}
		case "exit":
			return f.exitCode(), nil
		case "error":
			return 0, &Error{Kind: f.Kind, Message: f.Message}
		}
	}
}

// pumpStdin forwards input in chunks of at most StdinChunk as it
// arrives. A read error ends input like EOF does. It stops sending once
// done is closed; a Read still blocked then ends when the caller closes
// its stream.
func (a *Agent) pumpStdin(conn *relayConn, typed []byte, stdin io.Reader, closeStdin bool, done <-chan struct{}) {
	if len(typed) > 0 && conn.sendStdin(typed) != nil {
		return
	}
	if stdin != nil {
		buf := make([]byte, StdinChunk)
		for {
			n, err := stdin.Read(buf)
			if n > 0 {
				select {
				case <-done:
					return
				default:
				}
				if conn.sendStdin(buf[:n]) != nil {
					return
				}
			}
			if err != nil {
				break
			}
		}
	}
	if closeStdin {
		select {
		case <-done:
		default:
			_ = conn.send(op("stdin_close"))
		}
	}
}

// pumpResize passes terminal sizes on with pty_resize, on a connection of
// its own: a request frame on the pty's connection would end its input.
// Each resize is bounded by ControlTimeout and ctx (the live session).
func (a *Agent) pumpResize(ctx context.Context, pid int, resize <-chan TermSize) {
	for {
		select {
		case <-ctx.Done():
			return
		case sz, ok := <-resize:
			if !ok {
				return
			}
			_ = a.Resize(ctx, pid, sz.Cols, sz.Rows)
		}
	}
}

// killDetached kills pid with a context of its own: the caller's has
// usually ended, which is why the kill is needed. call bounds it by
// ControlTimeout.
func (a *Agent) killDetached(pid int) {
	_ = a.Kill(context.Background(), pid)
}
