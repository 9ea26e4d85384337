//go:build observability

package observability

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cocoonstack/vk-sandbox/kube/kubetest"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

const (
	rootToken = "obs-root-token-0123456789abcdef"
	// deadline bounds every wait on a condition; generous for 2 loaded
	// cores, a pass takes far less.
	deadline = 90 * time.Second
	// simService is the emulator's service.name in Jaeger.
	simService = "sandboxd-sim"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// startSim serves the emulator over real HTTP with its server spans
// exported to Jaeger, as sandboxd-sim does with OTEL_* set.
func startSim(t *testing.T) (*sim.Server, string) {
	t.Helper()
	tp, err := jaeger.TracerProvider(t.Context(), simService)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sim.Config{RootToken: rootToken, Pools: map[pool.Key]int{{Template: "default"}: 8}, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = s.Close()
		_ = tp.Shutdown(context.Background())
	})
	return s, srv.URL
}

// vkProcess is one vk-sandbox binary.
type vkProcess struct {
	node, metricsAddr, logPath string
	cmd                        *exec.Cmd
	exited                     chan error
}

// startVK runs vk-sandbox against sandboxdURL with OTLP export to Jaeger.
// Its batch span processor waits 10 minutes and holds 4096 spans, so
// nothing leaves the process before it is told to stop: every span Jaeger
// has of it afterwards was flushed by the shutdown.
func startVK(t *testing.T, sandboxdURL string) *vkProcess {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(rootToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v := &vkProcess{
		node:        fmt.Sprintf("vk-obs-%d", os.Getpid()),
		metricsAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		logPath:     filepath.Join(dir, "vk-sandbox.log"),
		exited:      make(chan error, 1),
	}
	logf, err := os.Create(v.logPath)
	if err != nil {
		t.Fatal(err)
	}
	v.cmd = exec.Command(vkBin,
		"--node-name", v.node, "--kubeconfig", env.Kubeconfig,
		"--listen-addr", "127.0.0.1:"+strconv.Itoa(freePort(t)), "--metrics-addr", v.metricsAddr,
		"--sandboxd-url", sandboxdURL, "--sandboxd-token-file", tokenFile,
		"--state-path", filepath.Join(dir, "state", "claims.json"),
		"--requeue-max", "2s", "--orphan-scan-interval", "0", "--log-level", "debug")
	v.cmd.Env = append(os.Environ(),
		"OTEL_EXPORTER_OTLP_ENDPOINT="+jaeger.OTLPEndpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=vk-sandbox",
		"OTEL_BSP_SCHEDULE_DELAY=600000",
		"OTEL_BSP_MAX_QUEUE_SIZE=4096",
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE=4096",
	)
	v.cmd.Stdout, v.cmd.Stderr = logf, logf
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := v.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { v.exited <- v.cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		if v.cmd.ProcessState == nil {
			_ = v.cmd.Process.Kill()
			<-v.exited
		}
		if t.Failed() {
			t.Logf("vk-sandbox log (tail):\n%s", tail(v.logPath, 60))
		}
	})
	eventually(t, "node "+v.node+" Ready", func(ctx context.Context) bool {
		return kubetest.NodeReady(ctx, env.Clientset(), v.node)
	})
	return v
}

// terminate sends SIGTERM and waits for a clean exit.
func (v *vkProcess) terminate(t *testing.T) {
	t.Helper()
	if err := v.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-v.exited:
		if err != nil {
			t.Fatalf("vk-sandbox exited with %v after SIGTERM", err)
		}
	case <-time.After(deadline):
		t.Fatalf("vk-sandbox did not exit within %s of SIGTERM", deadline)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
