package podload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// NullNode is one bench/nullnode process: a node that only watches its
// Pods and writes each one Running, the floor of a node's CPU.
type NullNode struct {
	cmd     *exec.Cmd
	done    chan error
	once    sync.Once
	exitErr error
}

// BuildNullNode builds bench/nullnode into dir (from anywhere in the
// module).
func BuildNullNode(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "nullnode")
	c := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/cocoonstack/vk-sandbox/bench/nullnode")
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	return bin, c.Run()
}

// ClaimArgs are the flags that make a null node claim (see bench/nullnode):
// at sandboxd url with token, committing each claim to the state file
// state. A claim holds its writer for the exchange and the fsync, so the
// claiming node gets 64 writers, as many as vk-sandbox's default
// --vk-workers; in 1,000-Pod bursts, 64 writers cost 0.78 × the CPU per
// Pod of 16 (their commits group more Pods per fsync), and finished
// sooner, in each of three pairs.
func ClaimArgs(url, token, state string) []string {
	return []string{"-sandboxd", url, "-token", token, "-state", state, "-workers", "64"}
}

// StartNullNode starts bin for node name and waits until its Pod cache
// has synced, so that its start-up is not part of the measurement. Its
// stderr goes to logPath; extra are more of its flags (-sandboxd ...).
func StartNullNode(ctx context.Context, bin, kubeconfig, name, contentType, logPath string, extra ...string) (*NullNode, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	c := exec.Command(bin, append([]string{"-kubeconfig", kubeconfig, "-node", name, "-content-type", contentType}, extra...)...)
	c.Stderr = logf
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	n := &NullNode{cmd: c, done: make(chan error, 1)}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		for sc.Scan() {
		}
		n.done <- c.Wait()
	}()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	select {
	case ok := <-ready:
		if ok {
			return n, nil
		}
		err = errors.New("nullnode exited before it was ready (see " + logPath + ")")
	case <-ctx.Done():
		err = fmt.Errorf("nullnode not ready: %w", ctx.Err())
	}
	_ = n.Stop()
	return nil, err
}

// Stop sends SIGTERM and waits for the exit; nil for exit 0. Idempotent.
func (n *NullNode) Stop() error {
	n.once.Do(func() {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		n.exitErr = <-n.done
	})
	return n.exitErr
}
