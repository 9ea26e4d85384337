package kubeletapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/agent"
)

// errNoRelayInteractive answers kubectl exec -i or -t on a node whose
// sandboxd refused the agent relay: the buffered exec it falls back to has
// no stdin and no terminal.
var errNoRelayInteractive = errdefs.InvalidInput("this node's sandboxd does not relay connections to the guest agent " +
	"(its agent upgrade was refused), so there is no stdin or terminal to attach: kubectl exec -i, -t and kubectl cp need it; " +
	"kubectl exec POD -- CMD ARGS without -i and -t still runs a command")

// RunInContainer is kubectl exec. The command runs in the sandbox through
// the guest agent (silkd) behind sandboxd's agent relay: output reaches
// kubectl as the guest writes it, stdin (-i, and so kubectl cp) is passed
// on as it arrives, -t runs it in a pseudo-terminal (tty.go), and the
// exit code is kubectl's. A node whose sandboxd refuses the relay gets
// sandboxd's buffered exec instead, for commands without -i and -t. The
// container name is not used: a sandbox Pod is one VM, whatever its
// containers.
func (a *API) RunInContainer(ctx context.Context, namespace, name, _ string, cmd []string, attach api.AttachIO) error {
	if len(cmd) == 0 {
		drainStdin(ctx, attach.Stdin(), stdinDrainLimit)
		return errdefs.InvalidInput("no command given: kubectl exec POD -- CMD ARGS")
	}
	if a.lacks(func(f pool.Features) bool { return f.Agent || f.Exec }) {
		drainStdin(ctx, attach.Stdin(), stdinDrainLimit)
		return errVerbMissing("kubectl exec", "exec or agent relay")
	}
	c, err := a.target(namespace, name)
	if err != nil {
		drainStdin(ctx, attach.Stdin(), stdinDrainLimit)
		return err
	}
	release, err := a.sessions.acquire(c.Key)
	if err != nil {
		drainStdin(ctx, attach.Stdin(), stdinDrainLimit)
		return err
	}
	defer release()
	ctx, stop := a.boundToClaim(ctx, c)
	defer stop()
	ag := a.sandboxd.Agent(c.ID, c.Token)
	defer ag.Close()
	var code int
	if attach.TTY() {
		code, err = a.runTTY(ctx, ag, cmd, attach)
	} else {
		code, err = ag.Exec(ctx, agent.Exec{Argv: cmd, Stdin: attach.Stdin(), Stdout: writer(attach.Stdout()), Stderr: writer(attach.Stderr())})
	}
	if errors.Is(err, agent.ErrNoRelay) {
		if attach.TTY() || attach.Stdin() != nil {
			drainStdin(ctx, attach.Stdin(), stdinDrainLimit)
			return errNoRelayInteractive
		}
		return a.runBuffered(ctx, c, cmd, attach)
	}
	if err != nil {
		if cerr := context.Cause(ctx); errors.Is(cerr, errClaimGone) {
			return fmt.Errorf("sandbox %s: %w", c.ID, cerr)
		}
		a.log.Log(ctx, agentRefusalLevel(err), "exec failed", "pod", c.Key, "sandbox", c.ID, "error", err)
		return explainAgent(err, c.ID)
	}
	return exitError(code)
}

// exitError is how the kubelet streaming server reports an exit code: an
// error of this shape becomes NonZeroExitCode with the code as its cause,
// and kubectl exits with it. -1 is silkd's "killed or unknown".
func exitError(code int) error {
	if code == 0 {
		return nil
	}
	return utilexec.CodeExitError{Err: fmt.Errorf("exit code %d", code), Code: code}
}

// writer is w, or a nil io.Writer when the stream was not asked for.
func writer(w io.WriteCloser) io.Writer {
	if w == nil {
		return nil
	}
	return w
}

// explainAgent turns a failure on the agent path into kubectl's message:
// sandboxd's refusals of the upgrade as for the other surfaces, silkd's
// own error frames in its words.
func explainAgent(err error, id string) error {
	var ae *agent.Error
	if errors.As(err, &ae) {
		if ae.Kind == agent.BadRequest {
			return errdefs.InvalidInputf("the guest agent of sandbox %s refused the command: %s", id, ae.Message)
		}
		return fmt.Errorf("the guest agent of sandbox %s: %s (%s)", id, ae.Message, ae.Kind)
	}
	if pool.StatusCode(err) != 0 {
		return explain(err, pool.VerbExec, id, 0, 0)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("the session with the guest agent of sandbox %s broke: %w", id, err)
}

func agentRefusalLevel(err error) slog.Level {
	var ae *agent.Error
	if errors.As(err, &ae) && ae.Kind == agent.BadRequest {
		return slog.LevelDebug
	}
	return refusalLevel(err)
}

// runBuffered is kubectl exec without -i and -t on a node without the
// agent relay: the command runs to completion through sandboxd's buffered
// exec, and its output is written once it ends.
func (a *API) runBuffered(ctx context.Context, c sandbox, cmd []string, attach api.AttachIO) error {
	secs, err := timeoutSeconds(ctx)
	if err != nil {
		return err
	}
	res, err := a.sandboxd.Exec(ctx, c.ID, c.Token, pool.ExecRequest{Argv: cmd, TimeoutSeconds: secs})
	if err != nil {
		a.log.Log(ctx, refusalLevel(err), "exec refused", "pod", c.Key, "sandbox", c.ID, "error", err)
		return explain(err, pool.VerbExec, c.ID, 0, secs)
	}
	if err := writeOutput(attach.Stdout(), res.Stdout); err != nil {
		return err
	}
	if err := writeOutput(attach.Stderr(), res.Stderr); err != nil {
		return err
	}
	return exitError(res.ExitCode)
}

// stdinDrainLimit bounds how long a refused interactive exec reads the
// input the client already sent.
const stdinDrainLimit = time.Second

// drainStdin reads and drops stdin until it ends, ctx ends or limit
// passes. A refusal must not close the stream while the client's input is
// still unread on the way: the apiserver's proxy then resets the
// connection, and kubectl loses the error and exits 0 as if the command
// had run. The reader goroutine ends when the stream is closed.
func drainStdin(ctx context.Context, stdin io.Reader, limit time.Duration) {
	if stdin == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, stdin)
	}()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// timeoutSeconds carries the request's deadline to sandboxd, rounded up to
// whole seconds; without one the command is bounded only by the request
// (0). A request already past its deadline is not sent.
func timeoutSeconds(ctx context.Context) (int64, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, nil
	}
	left := time.Until(dl)
	if left <= 0 {
		return 0, context.DeadlineExceeded
	}
	return int64((left + time.Second - 1) / time.Second), nil
}

// writeOutput writes s to w, which is nil when the stream was not asked for.
func writeOutput(w io.Writer, s string) error {
	if w == nil || s == "" {
		return nil
	}
	_, err := io.WriteString(w, s)
	return err
}

// errAttach answers kubectl attach. A sandbox is a VM with no main
// process whose streams attach could join; its processes are what kubectl
// exec starts.
var errAttach = errdefs.InvalidInput("kubectl attach: a sandbox Pod is a VM with no main process to attach to; " +
	"for a shell use kubectl exec -it POD -- sh, and to run a command kubectl exec POD -- CMD ARGS")

// AttachToContainer is refused with errAttach, once the input the client
// already sent is read.
func (a *API) AttachToContainer(ctx context.Context, _, _, _ string, attach api.AttachIO) error {
	drainStdin(ctx, attach.Stdin(), stdinDrainLimit)
	return errAttach
}
