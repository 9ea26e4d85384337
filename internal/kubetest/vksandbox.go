package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// vkTermGrace is how long Terminate waits for vk-sandbox to exit after
// SIGTERM before it kills it.
const vkTermGrace = 60 * time.Second

// BuildVKSandbox builds ./cmd/vk-sandbox of this repository into out, with
// the race detector when race is set. The compiler's output goes to stderr.
func BuildVKSandbox(ctx context.Context, out string, race bool) error {
	root, err := repoRoot()
	if err != nil {
		return fmt.Errorf("build vk-sandbox: %w", err)
	}
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/vk-sandbox")...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build vk-sandbox: %w", err)
	}
	return nil
}

// VKSandboxOptions describe a vk-sandbox process: a virtual node of the
// Env's apiserver in front of one sandboxd (or its emulator).
type VKSandboxOptions struct {
	Bin         string // the vk-sandbox binary (see BuildVKSandbox)
	Dir         string // holds the token file, the state file and one log per run
	Node        string // --node-name
	Kubeconfig  string
	SandboxdURL string
	Token       string // the sandboxd token, handed over in Dir/token
	// MetricsAddr is --metrics-addr; "" serves no metrics.
	MetricsAddr string
	// Args follow the common flags (node, kubeconfig, a free loopback
	// --listen-addr, metrics, sandboxd, token file, Dir/state/claims.json);
	// a repeated flag's last value wins.
	Args []string
	Env  []string // added to this process's environment
}

// VKSandbox is one vk-sandbox process, which may be stopped and started
// again with the same (or an edited) command line. Its methods are not safe
// for concurrent use.
//
// Invariants: a run gets SIGKILL when the thread that started it dies
// (Pdeathsig), so an aborted test or benchmark leaves no vk-sandbox behind;
// each run logs to its own file, Dir/vk-sandbox.<run>.log.
type VKSandbox struct {
	Node        string
	MetricsAddr string   // "" when it serves no metrics
	StatePath   string   // the --state-path of the common flags
	Args        []string // the command line of the next Start
	Env         []string // added to this process's environment

	bin, dir string
	logs     []string // one log file per run, in order
	run      *vkRun   // the current run; nil before Start and once it was waited for
}

// vkRun is one run of the process.
type vkRun struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process was reaped
	err  error         // its exit, valid after done is closed
}

// NewVKSandbox writes the token file and sets up the command line; Start
// runs it.
func NewVKSandbox(o VKSandboxOptions) (*VKSandbox, error) {
	tokenFile := filepath.Join(o.Dir, "token")
	if err := os.WriteFile(tokenFile, []byte(o.Token+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("vk-sandbox token file: %w", err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	v := &VKSandbox{Node: o.Node, MetricsAddr: o.MetricsAddr, StatePath: filepath.Join(o.Dir, "state", "claims.json"), Env: o.Env, bin: o.Bin, dir: o.Dir}
	v.Args = append([]string{
		"--node-name", o.Node, "--kubeconfig", o.Kubeconfig,
		"--listen-addr", "127.0.0.1:" + strconv.Itoa(port), "--metrics-addr", o.MetricsAddr,
		"--sandboxd-url", o.SandboxdURL, "--sandboxd-token-file", tokenFile, "--state-path", v.StatePath,
	}, o.Args...)
	return v, nil
}

// StartVKSandbox is NewVKSandbox, Start and WaitReady; on error nothing is
// left running.
func StartVKSandbox(ctx context.Context, cs kubernetes.Interface, o VKSandboxOptions) (*VKSandbox, error) {
	v, err := NewVKSandbox(o)
	if err != nil {
		return nil, err
	}
	if err := v.Start(); err != nil {
		return nil, err
	}
	if err := v.WaitReady(ctx, cs); err != nil {
		_ = v.Terminate()
		return nil, err
	}
	return v, nil
}

// Start runs vk-sandbox once more with Args and Env, logging to a new file.
// It does not wait for the node (see WaitReady).
func (v *VKSandbox) Start() error {
	v.logs = append(v.logs, filepath.Join(v.dir, fmt.Sprintf("vk-sandbox.%d.log", len(v.logs)+1)))
	logf, err := os.Create(v.LogPath())
	if err != nil {
		return fmt.Errorf("vk-sandbox log: %w", err)
	}
	cmd := exec.Command(v.bin, v.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), v.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start vk-sandbox (start %d): %w", v.Runs(), err)
	}
	r := &vkRun{cmd: cmd, done: make(chan struct{})}
	v.run = r
	go func() {
		r.err = cmd.Wait()
		logf.Close()
		close(r.done)
	}()
	return nil
}

// WaitReady waits until the node is Ready in the apiserver, failing early
// (with the log's tail) if the run exits first.
func (v *VKSandbox) WaitReady(ctx context.Context, cs kubernetes.Interface) error {
	for !NodeReady(ctx, cs, v.Node) {
		if err, exited := v.Exited(); exited {
			return fmt.Errorf("vk-sandbox exited before node %s was Ready (%v); log tail:\n%s", v.Node, err, v.Tail(20))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready: %w; log tail:\n%s", v.Node, ctx.Err(), v.Tail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Exited reports whether the current run has ended, and how (nil: exit 0).
// With no run it reports false.
func (v *VKSandbox) Exited() (err error, exited bool) {
	if v.run == nil {
		return nil, false
	}
	select {
	case <-v.run.done:
		return v.run.err, true
	default:
		return nil, false
	}
}

// Wait waits for the current run to end by itself and returns its exit
// error (nil: exit 0). With no run it returns nil.
func (v *VKSandbox) Wait() error {
	r := v.run
	if r == nil {
		return nil
	}
	<-r.done
	v.run = nil
	return r.err
}

// Terminate sends SIGTERM and returns the exit error (nil: exit 0). A run
// still there a minute later is killed, and that is an error. With no run it
// returns nil.
func (v *VKSandbox) Terminate() error {
	if v.run == nil {
		return nil
	}
	_ = v.run.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-v.run.done:
		return v.Wait()
	case <-time.After(vkTermGrace):
		_ = v.run.cmd.Process.Kill()
		_ = v.Wait()
		return fmt.Errorf("vk-sandbox did not exit within %v of SIGTERM", vkTermGrace)
	}
}

// Kill SIGKILLs the current run and waits up to timeout for it to end. A
// run that had ended by itself before the kill is an error: it was not
// killed.
func (v *VKSandbox) Kill(timeout time.Duration) error {
	if v.run == nil {
		return errors.New("SIGKILL vk-sandbox: not running")
	}
	cmd := v.run.cmd
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL vk-sandbox (start %d): %w", v.Runs(), err)
	}
	select {
	case <-v.run.done:
	case <-time.After(timeout):
		return fmt.Errorf("vk-sandbox (start %d) still running %v after SIGKILL", v.Runs(), timeout)
	}
	v.run = nil
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return fmt.Errorf("vk-sandbox (start %d) exited by itself before the kill: %v (log %s)", v.Runs(), cmd.ProcessState, v.LogPath())
	}
	return nil
}

// Pid is the current run's process id, 0 with no run.
func (v *VKSandbox) Pid() int {
	if v.run == nil {
		return 0
	}
	return v.run.cmd.Process.Pid
}

// ListenAddr is the kubelet API's address: the last --listen-addr in Args,
// which is the one the flag parser keeps.
func (v *VKSandbox) ListenAddr() string {
	addr := ""
	for i, a := range v.Args {
		if a == "--listen-addr" && i+1 < len(v.Args) {
			addr = v.Args[i+1]
		}
	}
	return addr
}

// Runs is how many times Start ran vk-sandbox.
func (v *VKSandbox) Runs() int { return len(v.logs) }

// LogPaths are the log files of every run, oldest first.
func (v *VKSandbox) LogPaths() []string { return v.logs }

// LogPath is the latest run's log file ("" before the first Start).
func (v *VKSandbox) LogPath() string {
	if len(v.logs) == 0 {
		return ""
	}
	return v.logs[len(v.logs)-1]
}

// Log is what the latest run logged so far.
func (v *VKSandbox) Log() string {
	b, _ := os.ReadFile(v.LogPath())
	return string(b)
}

// Tail is the last n lines of the latest run's log.
func (v *VKSandbox) Tail(n int) string { return tailFile(v.LogPath(), 0, n) }
