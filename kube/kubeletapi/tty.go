package kubeletapi

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"

	"github.com/cocoonstack/vk-sandbox/pool/agent"
)

// firstSizeWait bounds how long kubectl exec -t waits for the client's
// terminal size before it opens the terminal at 80x24; kubectl sends it
// as soon as the streams are up.
const firstSizeWait = 2 * time.Second

// runTTY is kubectl exec -t: silkd's pty_open, which takes no command but
// starts the user's shell in a terminal of the client's size. The command
// is typed as the terminal's first line, "exec 'ARG'...", so that it
// replaces the shell and its exit code is the session's; a bare shell
// (kubectl exec -it POD -- sh) is left to run as it is. Window sizes are
// forwarded as they change; Ctrl-C and Ctrl-D are bytes like any other,
// which the guest's terminal turns into signals and end of input.
func (a *API) runTTY(ctx context.Context, ag *agent.Agent, cmd []string, attach api.AttachIO) (int, error) {
	size := agent.TermSize{Cols: 80, Rows: 24}
	resize := attach.Resize()
	if resize != nil {
		t := time.NewTimer(firstSizeWait)
		select {
		case sz, ok := <-resize:
			if ok && sz.Width > 0 && sz.Height > 0 {
				size = agent.TermSize{Cols: int(sz.Width), Rows: int(sz.Height)}
			}
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	sizes := make(chan agent.TermSize)
	go func() {
		defer close(sizes)
		for resize != nil {
			select {
			case sz, ok := <-resize:
				if !ok {
					return
				}
				select {
				case sizes <- agent.TermSize{Cols: int(sz.Width), Rows: int(sz.Height)}:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	var typed []byte
	if !bareShell(cmd) {
		typed = []byte(ttyCommandLine(cmd))
	}
	return ag.PTY(ctx, agent.PTY{Cols: size.Cols, Rows: size.Rows, Typed: typed, Stdin: attach.Stdin(),
		Stdout: writer(attach.Stdout()), Resize: sizes})
}

// bareShell is a command that only asks for a shell: pty_open starts one.
func bareShell(cmd []string) bool {
	if len(cmd) != 1 {
		return false
	}
	switch path.Base(cmd[0]) {
	case "sh", "bash", "ash", "dash", "zsh", "ksh", "mksh", "fish":
		return true
	}
	return false
}

// ttyCommandLine is the line typed into the guest's shell: exec and each
// argument single-quoted for a POSIX shell, so that spaces, quotes, $ and
// globs reach the command as they were given.
func ttyCommandLine(cmd []string) string {
	var b strings.Builder
	b.WriteString("exec")
	for _, a := range cmd {
		b.WriteString(" '")
		b.WriteString(strings.ReplaceAll(a, "'", `'\''`))
		b.WriteString("'")
	}
	b.WriteString("\n")
	return b.String()
}
