//go:build observability

// Package observability is the real-backend test of docs/observability.md:
// the vk-sandbox binary against a real kube-apiserver (internal/kubetest) and
// the sandboxd emulator, exporting over OTLP to a real Jaeger v2, scraped
// by a real Prometheus when the machine has one, and one trace opened in
// headless Chromium when it has that. It is behind the observability build
// tag so that `make test` does not pay for it; `make test-observability`
// runs it.
package observability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
)

var (
	env    *kubetest.Env
	jaeger *kubetest.Jaeger
	vkBin  string
	// repo is the repository root, for bin/, docs/ and the dashboard.
	repo string
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	var err error
	if repo, err = filepath.Abs("../.."); err != nil {
		logf("%v", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "vk-obs-")
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer os.RemoveAll(dir)
	vkBin = filepath.Join(dir, "vk-sandbox")
	if err := kubetest.BuildVKSandbox(ctx, vkBin, false); err != nil {
		logf("%v", err)
		return 1
	}
	if env, err = kubetest.Start(ctx, kubetest.Options{Logf: logf}); err != nil {
		logf("control plane: %v", err)
		return 1
	}
	defer env.Stop()
	if err := env.InstallCRDs(ctx, filepath.Join(repo, "manifests/test/sandbox-owner-crd.yaml")); err != nil {
		logf("CRDs: %v", err)
		return 1
	}
	start := time.Now()
	jaeger, err = kubetest.StartJaeger(ctx, kubetest.JaegerOptions{
		Dir: filepath.Join(dir, "jaeger"), Logf: logf, UIAssets: os.Getenv("VK_JAEGER_UI_ASSETS"),
	})
	if err != nil {
		logf("jaeger: %v", err)
		return 1
	}
	defer jaeger.Stop()
	logf("jaeger up in %s: OTLP %s, query %s", time.Since(start).Round(time.Millisecond), jaeger.OTLPEndpoint, jaeger.QueryURL)
	code := m.Run()
	if code != 0 {
		logf("jaeger log %s (tail):\n%s", jaeger.Log, tail(jaeger.Log, 30))
	}
	return code
}
