package kubetest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// proc is one control-plane child process.
//
// Invariants: the child leads its own process group (so stop reaches
// anything it forks), it gets SIGKILL when the thread that started it dies
// (Pdeathsig; the Go runtime does not retire threads of unlocked goroutines,
// so in practice that is when the test binary dies), and its stdout and
// stderr are appended to logPath, which survives restarts of the process.
type proc struct {
	name    string
	logPath string
	logFrom int64 // size of logPath before this run, so tails skip earlier runs
	cmd     *exec.Cmd
	done    chan struct{} // closed once Wait returned
	waitErr error         // valid after done is closed
}

func startProc(name, bin string, args []string, logPath string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", name, err)
	}
	// The child has its own copy of the descriptor after Start.
	defer f.Close()
	var from int64
	if st, err := f.Stat(); err == nil {
		from = st.Size()
	}
	fmt.Fprintf(f, "=== kubetest %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &proc{name: name, logPath: logPath, logFrom: from, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exitedErr describes an early exit, with the log tail, or returns nil if
// the process is still running.
func (p *proc) exitedErr() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited early (%v); log %s:\n%s", p.name, p.waitErr, p.logPath, p.tail(30))
	default:
		return nil
	}
}

// stop sends SIGTERM to the group, waits up to grace, then SIGKILLs the
// group and waits for the leader to be reaped. grace 0 kills at once.
func (p *proc) stop(grace time.Duration) error {
	pgid := p.cmd.Process.Pid
	if grace > 0 {
		if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("stop %s: SIGTERM: %w", p.name, err)
		}
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	// Kill the group even if the leader is gone: a forked helper must not
	// outlive the Env.
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s: SIGKILL: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("stop %s: pid %d not reaped 30s after SIGKILL", p.name, pgid)
	}
}

// tail returns the last n lines this run of the process logged.
func (p *proc) tail(n int) string { return tailFile(p.logPath, p.logFrom, n) }

// tailFile returns the last n lines of a file after offset from, reading at
// most 64 KiB.
func tailFile(path string, from int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const maxRead = 64 << 10
	if st, err := f.Stat(); err == nil {
		from = max(from, st.Size()-maxRead)
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	b, _ := io.ReadAll(f)
	return lastLines(string(b), n)
}
