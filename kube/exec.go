package kube

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// ErrInteractive answers kubectl exec -i or -t: sandboxd's exec runs a
// command to completion and buffers its output; it has no stdin and no
// terminal to attach.
var ErrInteractive = errdefs.InvalidInput("interactive sessions (kubectl exec -i or -t, kubectl attach) are not supported yet: " +
	"sandboxd runs a command to completion without stdin or a terminal; run it without -i and -t, as kubectl exec POD -- CMD ARGS")

// RunInContainer is kubectl exec without -i and -t: the command runs to
// completion in the sandbox through sandboxd's buffered exec, its stdout
// and stderr are written to the streams once it ends, and a non-zero exit
// code is passed through, so kubectl exec exits with it. The container
// name is not used: a sandbox Pod is one VM, whatever its containers.
func (p *Provider) RunInContainer(ctx context.Context, namespace, name, _ string, cmd []string, attach api.AttachIO) error {
	if attach.TTY() || attach.Stdin() != nil {
		drainStdin(ctx, attach.Stdin(), stdinDrainLimit)
		return ErrInteractive
	}
	if len(cmd) == 0 {
		return errdefs.InvalidInput("no command given: kubectl exec POD -- CMD ARGS")
	}
	c, err := p.target(namespace, name)
	if err != nil {
		return err
	}
	secs, err := timeoutSeconds(ctx)
	if err != nil {
		return err
	}
	res, err := p.Sandboxd.Exec(ctx, c.ID, c.Token, pool.ExecRequest{Argv: cmd, TimeoutSeconds: secs})
	if err != nil {
		p.log.Log(ctx, refusalLevel(err), "exec refused", "pod", namespace+"/"+name, "sandbox", c.ID, "error", err)
		return explain(err, pool.VerbExec, c.ID, 0, secs)
	}
	if err := writeOutput(attach.Stdout(), res.Stdout); err != nil {
		return err
	}
	if err := writeOutput(attach.Stderr(), res.Stderr); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		// The kubelet streaming server reports an error of this shape as
		// the exit code (NonZeroExitCode, with the code as its cause), and
		// kubectl exits with it.
		return utilexec.CodeExitError{Err: fmt.Errorf("exit code %d", res.ExitCode), Code: res.ExitCode}
	}
	return nil
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

// AttachToContainer is refused: attaching needs the interactive session
// that sandboxd does not offer.
func (p *Provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return ErrInteractive
}
