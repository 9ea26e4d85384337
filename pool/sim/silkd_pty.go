package sim

import (
	"cmp"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/creack/pty"
)

// ptyOpen is silkd's pty_open: the user's shell, interactive, in a
// pseudo-terminal of cols x rows; stdin frames are typed into it and its
// output comes back as stdout frames. It runs the host's shell (SHELL,
// else /bin/bash, else /bin/sh) in the sandbox's scratch directory, with
// silkd's environment (PATH, TERM, HOME, and env), so only behind
// Config.GuestHostShell; otherwise the answer is unimplemented. The shell
// is killed when the connection drops; stdin_close is ignored.
func (g *silkGuest) ptyOpen(c *silkConn, req *silkReq) bool {
	if !g.hostShell {
		return c.fail("unimplemented", "this emulator runs no shell (sandboxd-sim --guest-host-shell runs the host's)") == nil
	}
	cmd := exec.Command(hostShell(), "-i")
	cmd.Dir = g.root
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TERM=" + cmp.Or(req.Env["TERM"], "xterm"), "HOME=" + g.root}
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(max(req.Cols, 1)), Rows: uint16(max(req.Rows, 1))})
	if err != nil {
		return c.fail("internal", "pty: "+err.Error()) == nil
	}
	begun := make(chan struct{}) // started comes before any output
	p := g.start([]string{cmd.Path, "-i"}, false, func(ctx context.Context, p *proc) int {
		<-begun
		context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
		out := make(chan struct{})
		go func() {
			defer close(out)
			// EIO is how Linux reports the terminal's other side closed.
			_, _ = io.Copy(recorder{p, output{c, "stdout"}}, tty)
		}()
		err := cmd.Wait()
		<-out
		_ = tty.Close()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		}
		return -1
	})
	p.resize = func(cols, rows int) error {
		return pty.Setsize(tty, &pty.Winsize{Cols: uint16(max(cols, 1)), Rows: uint16(max(rows, 1))})
	}
	err = c.send(map[string]any{"type": "started", "pid": p.pid})
	close(begun)
	if err != nil {
		g.kill(p.pid)
		return false
	}
	go func() {
		for {
			req, err := c.recv()
			if err != nil {
				g.kill(p.pid) // the connection dropped: the shell goes with it
				return
			}
			switch req.Op {
			case "stdin":
				_, _ = tty.Write(req.Data)
			case "stdin_close":
			default:
				return // another request ends the pty's input
			}
		}
	}()
	<-p.done
	p.mu.Lock()
	code := p.code
	p.mu.Unlock()
	_ = c.send(map[string]any{"type": "exit", "code": code})
	return false // the pty's connection ends with it
}

func hostShell() string {
	for _, sh := range []string{os.Getenv("SHELL"), "/bin/bash", "/bin/sh"} {
		if sh != "" && !strings.Contains(sh, "\x00") {
			if _, err := os.Stat(sh); err == nil {
				return sh
			}
		}
	}
	return "/bin/sh"
}
