//go:build observability

package observability

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
)

const (
	rootToken = "obs-root-token-0123456789abcdef"
	// deadline bounds every wait on a condition; generous for 2 loaded
	// cores, a pass takes far less.
	deadline = 90 * time.Second
	// simService is the emulator's service.name in Jaeger.
	simService = "sandboxd-sim"
)

// eventually polls cond until it holds or the deadline passes
// (testkit.WaitForCtx).
func eventually(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	testkit.WaitForCtx(t, deadline, what, func(ctx context.Context) (bool, error) { return cond(ctx), nil })
}

// startSim serves the emulator over real HTTP with its server spans
// exported to Jaeger, as sandboxd-sim does with OTEL_* set.
func startSim(t *testing.T) (*sim.Server, string) {
	t.Helper()
	tp, err := jaeger.TracerProvider(t.Context(), simService)
	if err != nil {
		t.Fatal(err)
	}
	// Shut down after the emulator closed (cleanups run last first).
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := simtest.Start(t, sim.Config{RootToken: rootToken, Pools: map[pool.Key]int{{Template: "default"}: 8}, TracerProvider: tp})
	return e.Sim, e.URL
}

// startVK runs vk-sandbox against sandboxdURL with OTLP export to Jaeger.
// Its batch span processor waits 10 minutes and holds 4096 spans, so
// nothing leaves the process before it is told to stop: every span Jaeger
// has of it afterwards was flushed by the shutdown.
func startVK(t *testing.T, sandboxdURL string) *kubetest.VKSandbox {
	t.Helper()
	metricsPort, err := kubetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	vk, err := kubetest.StartVKSandbox(ctx, env.Clientset(), kubetest.VKSandboxOptions{
		Bin: vkBin, Dir: t.TempDir(), Node: fmt.Sprintf("vk-obs-%d", os.Getpid()), Kubeconfig: env.Kubeconfig,
		SandboxdURL: sandboxdURL, Token: rootToken, MetricsAddr: "127.0.0.1:" + strconv.Itoa(metricsPort),
		Args: []string{"--requeue-max", "2s", "--orphan-scan-interval", "0", "--log-level", "debug"},
		Env: []string{
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + jaeger.OTLPEndpoint,
			"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			"OTEL_SERVICE_NAME=vk-sandbox",
			"OTEL_BSP_SCHEDULE_DELAY=600000",
			"OTEL_BSP_MAX_QUEUE_SIZE=4096",
			"OTEL_BSP_MAX_EXPORT_BATCH_SIZE=4096",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = vk.Kill(deadline) // an error only if it is no longer running
		if t.Failed() {
			t.Logf("vk-sandbox log (tail):\n%s", vk.Tail(60))
		}
	})
	return vk
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
