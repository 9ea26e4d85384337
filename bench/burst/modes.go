package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

const (
	modeBare     = "bare"
	modeProvider = "provider"
	modeDefault  = "provider-default-limiters"
	modeNull     = "null-node"
	// modeNullClaim is bench/nullnode with -sandboxd: the minimal node
	// plus the claim's own work (one claim exchange and one fsynced
	// commit per Pod), the floor of any node that claims.
	modeNullClaim = "null-node-claim"
	rootToken     = "burst-root-token-0123456789abcdef"
)

// isProvider reports whether mode runs vk-sandbox: this tree's build, or
// a prebuilt one (provider-NAME, see -vk-bins).
func isProvider(mode string) bool { return strings.HasPrefix(mode, modeProvider) }

// vkNode is one emulator plus one vk-sandbox process (kubetest.VKSandbox).
type vkNode struct {
	sim *sim.Server
	srv *httptest.Server
	vk  *kubetest.VKSandbox // nil for a provider run in this process
	// inProcess stops a provider run in this process (startInProcess).
	inProcess func() error
	metrics   string // host:port, or "" when not exposed
	name      string
	state     string // the claimer's state file: its node key marks the node's VMs
	stopOnce  sync.Once
	exitErr   error
}

type nodeOpts struct {
	bin, kubeconfig, dir, name string
	n                          int
	claimLatency               time.Duration
	api                        string  // the emulator's API version ("" the newest)
	loseAnswers                float64 // the emulator's lost-answer rate
	metrics                    bool
	extraArgs                  []string
	env                        []string // added to vk-sandbox's environment
}

// simConfig is the emulator of a provider run.
func (o nodeOpts) simConfig() sim.Config {
	return sim.Config{
		RootToken: rootToken, Pools: map[pool.Key]int{{Template: "default"}: o.n + 64},
		ClaimLatency: o.claimLatency, MaxClaims: 0, APIVersion: o.api, LoseAnswerRate: o.loseAnswers,
	}
}

// startVK starts the emulator and vk-sandbox, and waits for the node to be
// Ready: readiness is a precondition of the run, not part of the
// measurement.
func startVK(ctx context.Context, cs kubernetes.Interface, o nodeOpts) (*vkNode, error) {
	v, err := startSim(o)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*vkNode, error) { v.stop(); return nil, err }
	vo := kubetest.VKSandboxOptions{
		Bin: o.bin, Dir: o.dir, Node: o.name, Kubeconfig: o.kubeconfig,
		SandboxdURL: v.srv.URL, Token: rootToken, Args: []string{"--orphan-scan-interval", "0", "--log-level", "warn"},
	}
	if o.metrics {
		port, err := kubetest.FreePort()
		if err != nil {
			return fail(err)
		}
		vo.MetricsAddr = "127.0.0.1:" + strconv.Itoa(port)
	}
	vo.Args = append(vo.Args, o.extraArgs...)
	vo.Env = o.env
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if v.vk, err = kubetest.StartVKSandbox(rctx, cs, vo); err != nil {
		return fail(err)
	}
	v.metrics, v.state = v.vk.MetricsAddr, v.vk.StatePath
	return v, nil
}

// startSim starts node o's emulator alone: the node is vk-sandbox
// (startVK), or a claiming null node.
func startSim(o nodeOpts) (*vkNode, error) {
	s, err := sim.New(o.simConfig())
	if err != nil {
		return nil, err
	}
	return &vkNode{sim: s, srv: httptest.NewServer(s.Handler()), name: o.name}, nil
}

// identity is how the claimer marks its VMs: its name and the node key
// beside its state file. Before the claimer has made its key, none: no VM
// is the node's yet.
func (v *vkNode) identity() pipeline.Identity {
	key, _ := store.ReadNodeKey(v.state)
	return pipeline.Identity{Node: v.name, Key: key}
}

// stop terminates vk-sandbox, then closes the emulator, and returns
// vk-sandbox's exit error (nil: exit 0). Idempotent.
func (v *vkNode) stop() error {
	v.stopOnce.Do(func() {
		switch {
		case v.vk != nil:
			v.exitErr = v.vk.Terminate()
		case v.inProcess != nil:
			v.exitErr = v.inProcess()
		}
		v.srv.Close()
		_ = v.sim.Close()
	})
	return v.exitErr
}

// claimTimes maps the Pod key (namespace/name) of each VM this node
// claimed to the emulator's claimed_at.
func (v *vkNode) claimTimes() map[string]time.Time {
	out := map[string]time.Time{}
	id := v.identity()
	for _, sb := range v.sim.Sandboxes() {
		if key, _, ok := id.Owns(sb, true); ok && sb.ClaimedAt != nil {
			out[string(key)] = *sb.ClaimedAt
		}
	}
	return out
}

func (v *vkNode) scrape() (string, error) {
	if v.metrics == "" {
		return "", nil
	}
	b, err := v.get("/metrics")
	return string(b), err
}

// get is the body of path on vk-sandbox's metrics listener; a status other
// than 200 is an error.
func (v *vkNode) get(path string) ([]byte, error) {
	resp, err := http.Get("http://" + v.metrics + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return b, err
}

// saveAllocs saves vk-sandbox's allocation profile as dir/tag.pb.gz; a
// node without a profiling endpoint (the minimal nodes) saves nothing.
func (v *vkNode) saveAllocs(dir, tag string) {
	if v.metrics == "" {
		return
	}
	b, err := v.get("/debug/pprof/allocs")
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, tag+".pb.gz"), b, 0o644)
	}
	if err != nil {
		logf("allocs %s: %v", tag, err)
	}
}
