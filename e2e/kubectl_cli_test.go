package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// The kubectl binary itself (make tools builds it into bin/), run
// against the harness's apiserver.
func (k *kubectlNode) kubectlCmd(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := filepath.Abs("../bin/kubectl")
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		t.Fatalf("no kubectl at bin/kubectl: run make tools (%v)", err)
	}
	return exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", env.Kubeconfig, "-n", k.ns}, args...)...)
}

// kubectl exec exits with the command's code, and its output streams: the
// first line arrives while the command still runs. kubectl killed
// mid-command kills the command in the guest.
func TestKubectlCLIExecStreamsAndExitCode(t *testing.T) {
	k := startKubectlNode(t)
	cmd := k.kubectlCmd(t.Context(), t, "exec", k.pod, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 3 || out.String() != "out\n" || !strings.Contains(errb.String(), "err\n") {
		t.Fatalf("kubectl exec: %v, stdout %q, stderr %q; want exit 3", err, out.String(), errb.String())
	}
	cmd = k.kubectlCmd(t.Context(), t, "exec", k.pod, "--", "sh", "-c", "echo first; sleep 600; echo last")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	_ = cmd.Process.Kill() // the client goes away mid-command
	_ = cmd.Wait()
	testkit.WaitFor(t, waitFor, "the guest's sh killed", func() bool {
		for _, p := range k.Sim.GuestProcs(k.sandbox.ID) {
			if p.State == "running" {
				return false
			}
		}
		return k.counter("agent_kill") == 1
	})
}

// kubectl cp into and out of the Pod: 64 MiB, byte for byte.
func TestKubectlCLICpBothWays(t *testing.T) {
	k := startKubectlNode(t)
	dir := t.TempDir()
	payload := make([]byte, 64<<20)
	_, _ = rand.Read(payload)
	src := filepath.Join(dir, "big")
	if err := os.WriteFile(src, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := k.kubectlCmd(t.Context(), t, "cp", src, k.pod+":/tmp/big").CombinedOutput(); err != nil {
		t.Fatalf("kubectl cp in: %v\n%s", err, out)
	}
	back := filepath.Join(dir, "back")
	if out, err := k.kubectlCmd(t.Context(), t, "cp", k.pod+":/tmp/big", back).CombinedOutput(); err != nil {
		t.Fatalf("kubectl cp out: %v\n%s", err, out)
	}
	got, err := os.ReadFile(back)
	if err != nil || sha256.Sum256(got) != sha256.Sum256(payload) {
		t.Fatalf("copied back %d bytes (%v), sha256 differs from the 64 MiB sent", len(got), err)
	}
}

// kubectl exec -it from a real terminal: a prompt, a command and its
// output, the terminal's size and a resize, and exit.
func TestKubectlCLIExecTTY(t *testing.T) {
	k := startKubectlNodeWith(t, sim.Config{GuestHostShell: true})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	cmd := k.kubectlCmd(ctx, t, "exec", "-it", k.pod, "--", "sh")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var screen testkit.Buffer
	go func() { _, _ = io.Copy(&screen, tty) }()
	expect := func(what string) {
		t.Helper()
		testkit.WaitFor(t, waitFor, what+" on the terminal", func() bool { return strings.Contains(screen.String(), what) })
	}
	testkit.WaitFor(t, waitFor, "a prompt", func() bool { s := screen.String(); return strings.Contains(s, "$ ") || strings.Contains(s, "# ") })
	_, _ = tty.WriteString("echo hello-$((6*7))\r")
	expect("hello-42")
	_, _ = tty.WriteString("stty size\r")
	expect("30 100")
	_ = pty.Setsize(tty, &pty.Winsize{Cols: 120, Rows: 40}) // kubectl sees SIGWINCH
	// The resize travels kubectl -> apiserver -> node -> silkd on its own
	// connection, so the probe is typed again on each poll until it shows.
	testkit.WaitFor(t, waitFor, "the new size", func() bool {
		if strings.Contains(screen.String(), "40 120") {
			return true
		}
		_, _ = tty.WriteString("stty size\r")
		return false
	})
	_, _ = tty.WriteString("exit\r")
	if err := cmd.Wait(); err != nil {
		t.Errorf("kubectl exec -it: %v", err)
	}
	t.Logf("transcript:\n%s", screen.String())
}

// kubectl attach says what to use instead.
func TestKubectlCLIAttachIsRefused(t *testing.T) {
	k := startKubectlNode(t)
	out, err := k.kubectlCmd(t.Context(), t, "attach", k.pod).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "kubectl exec -it") {
		t.Errorf("kubectl attach: %v\n%s", err, out)
	}
}
