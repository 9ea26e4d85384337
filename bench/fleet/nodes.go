package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

const rootToken = "fleet-root-token-0123456789abcdef"

// node is one fleet member: its own emulator (in this process) and its
// own vk-sandbox process (kubetest.VKSandbox), running as its own user.
type node struct {
	name string
	sim  *sim.Server
	srv  *httptest.Server
	vk   *kubetest.VKSandbox
}

// startNode starts node i's emulator and process; waitReady waits for the
// Node object. The orphan scan runs at its default interval, as deployed.
func (f *fleet) startNode(i int) (*node, error) {
	n, err := f.startSim(nodeName(i))
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(f.dir, n.name)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := errors.Join(os.MkdirAll(dir, 0o755), f.env.WriteKubeconfig(kubeconfig, f.users[i].Token)); err != nil {
		n.stop()
		return nil, err
	}
	n.vk, err = kubetest.NewVKSandbox(kubetest.VKSandboxOptions{
		Bin: f.vkBin, Dir: dir, Node: n.name, Kubeconfig: kubeconfig, SandboxdURL: n.srv.URL, Token: rootToken,
		Args: append([]string{"--orphan-scan-interval", "60s", "--log-level", "warn",
			"--node-pods", strconv.Itoa(max(f.o.pods, 2000))}, f.o.vkArgs...),
		Env: f.o.vkEnv,
	})
	if err == nil {
		err = n.vk.Start()
	}
	if err != nil {
		n.vk = nil
		n.stop()
		return nil, err
	}
	return n, nil
}

// startSim starts the emulator of the node named name, alone.
func (f *fleet) startSim(name string) (*node, error) {
	s, err := sim.New(sim.Config{RootToken: rootToken, ClaimLatency: f.o.claimLatency,
		Pools: map[pool.Key]int{{Template: "default"}: f.o.pods + 64}})
	if err != nil {
		return nil, err
	}
	return &node{name: name, sim: s, srv: httptest.NewServer(s.Handler())}, nil
}

func (n *node) pid() int { return n.vk.Pid() }

func (n *node) waitReady(ctx context.Context, f *fleet) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	return n.vk.WaitReady(ctx, f.cs)
}

// stop terminates vk-sandbox, then closes the emulator. It returns the
// exit error, nil for exit 0.
func (n *node) stop() error {
	var err error
	if n.vk != nil {
		err = n.vk.Terminate()
		n.vk = nil
	}
	if n.srv != nil {
		n.srv.Close()
		_ = n.sim.Close()
		n.srv = nil
	}
	return err
}
