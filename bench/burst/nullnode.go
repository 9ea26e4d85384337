package main

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

// nullNode is one bench/nullnode process: a node that only watches its
// Pods and writes each one Running (the null-node mode).
type nullNode struct {
	cmd     *exec.Cmd
	done    chan error
	once    sync.Once
	exitErr error
}

// buildNullNode builds ./bench/nullnode into dir.
func buildNullNode(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "nullnode")
	c := exec.CommandContext(ctx, "go", "build", "-o", bin, "./bench/nullnode")
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	return bin, c.Run()
}

// startNullNode starts bin for node name and waits until its Pod cache
// has synced, so that its start-up is not part of the measurement.
func startNullNode(ctx context.Context, bin, kubeconfig, name, contentType, logPath string) (*nullNode, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	c := exec.Command(bin, "-kubeconfig", kubeconfig, "-node", name, "-content-type", contentType)
	c.Stderr = logf
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	n := &nullNode{cmd: c, done: make(chan error, 1)}
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
	_ = n.stop()
	return nil, err
}

// stop sends SIGTERM and waits for the exit; nil for exit 0. Idempotent.
func (n *nullNode) stop() error {
	n.once.Do(func() {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		n.exitErr = <-n.done
	})
	return n.exitErr
}
