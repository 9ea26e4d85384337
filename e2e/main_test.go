package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
)

// One control plane serves every test of this package; each test gets its
// own namespace, virtual node, emulator and vk-sandbox process.
var (
	env   *kubetest.Env
	vkBin string
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "vk-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	vkBin = filepath.Join(dir, "vk-sandbox")
	if err := kubetest.BuildVKSandbox(ctx, vkBin, raceBinary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err = kubetest.Start(ctx, kubetest.Options{Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	defer env.Stop()
	if err := env.InstallCRDs(ctx, "../manifests/test/sandbox-owner-crd.yaml"); err != nil {
		fmt.Fprintln(os.Stderr, "CRDs:", err)
		return 1
	}
	return m.Run()
}
