package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

// viaKubectl names the figures taken with the kubectl binary itself (make
// tools builds it into bin/), with its own choice of transport.
const viaKubectl = "kubectl"

// kubectlCLI runs bin/kubectl against the harness's apiserver.
type kubectlCLI struct {
	bin, kubeconfig, ns string
}

func newKubectlCLI(kubeconfig, ns string) (*kubectlCLI, error) {
	bin := "bin/kubectl"
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("-kubectl needs bin/kubectl, from the repository root: run make tools (%w)", err)
	}
	return &kubectlCLI{bin: bin, kubeconfig: kubeconfig, ns: ns}, nil
}

func (k *kubectlCLI) cmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig, "-n", k.ns}, args...)...)
}

// execTrue is `kubectl exec POD -- true`, the process's start-up included.
func (k *kubectlCLI) execTrue(ctx context.Context) error {
	if out, err := k.cmd(ctx, "exec", podName, "--", "true").CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl exec: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

var forwarding = regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) ->`)

// portForward is `kubectl port-forward POD 0:guestPort`: it returns the
// local address it listens on, and a stop that interrupts it.
func (k *kubectlCLI) portForward(ctx context.Context) (string, func(), error) {
	cmd := k.cmd(ctx, "port-forward", "--address", "127.0.0.1", "pod/"+podName, fmt.Sprintf("0:%d", guestPort))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out) // past a line too long to scan; it must never block kubectl
	}()
	select {
	case a := <-addr:
		return a, stop, nil
	case <-time.After(30 * time.Second):
		stop()
		return "", nil, fmt.Errorf("kubectl port-forward did not say where it listens within 30s")
	}
}

// kubectlRoundTrips is the new-session pair with the kubectl binary:
// `kubectl exec POD -- true` against a new connection to a running
// `kubectl port-forward`, interleaved.
func kubectlRoundTrips(ctx context.Context, k *kubectlCLI, n, warmup int) (transportResult, error) {
	r := transportResult{Via: viaKubectl}
	local, stop, err := k.portForward(ctx)
	if err != nil {
		return r, err
	}
	defer stop()
	var execNew, fwdNew []float64
	if err := interleave(warmup+n, warmup, func(d float64) float64 { return d },
		step{into: &execNew, f: func() error { return k.execTrue(ctx) }},
		step{into: &fwdNew, f: func() error { return connectEcho(local) }},
	); err != nil {
		return r, fmt.Errorf("kubectl round trip: %w", err)
	}
	r.ExecNew, r.ForwardNew = podload.Summarize(execNew), podload.Summarize(fwdNew)
	return r, nil
}
