package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/agent"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// startInProcess runs the provider inside this process, assembled by
// kube.NewDaemon, with virtual-kubelet's default queue rate limiters (10
// qps, burst 100): a comparison the binary does not offer, so it is set
// through the library. Its CPU is the harness's.
func startInProcess(ctx context.Context, cs kubernetes.Interface, rc *rest.Config, o nodeOpts) (*vkNode, error) {
	s, err := sim.New(o.simConfig())
	if err != nil {
		return nil, err
	}
	v := &vkNode{sim: s, srv: httptest.NewServer(s.Handler()), name: o.name, state: filepath.Join(o.dir, "claims.json")}
	fail := func(err error) (*vkNode, error) { v.stop(); return nil, err }
	sbx, err := pool.NewClient(pool.ClientOptions{BaseURL: v.srv.URL, Token: rootToken})
	if err != nil {
		return fail(err)
	}
	st, err := store.Open(v.state, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fail(err)
	}
	key, err := st.NodeKey()
	if err != nil {
		return fail(err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fail(err)
	}
	tlsCfg, err := kube.KubeletTLS("", "", o.name, "")
	if err != nil {
		return fail(err)
	}
	log := slog.New(slog.DiscardHandler)
	d, err := kube.NewDaemon(kube.DaemonConfig{
		Provider: kube.ProviderOptions{Authorizer: &kube.Authorizer{Dynamic: dyn}, Log: log, PodClient: cs.CoreV1(), Sandboxd: agent.New(sbx, 0), NodeName: o.name},
		Pipeline: pipeline.Config{Node: o.name, NodeKey: key, QueueDepth: o.n + 64, Sandboxd: sbx, Store: st, Logger: log},
		Node: kube.NodeOptions{Name: o.name, ListenAddr: "127.0.0.1:0", TLS: tlsCfg, Version: "burst", Client: cs,
			EventRecorder: &record.FakeRecorder{}, Pods: o.n + 64, DefaultRateLimiters: true},
		Log: log,
	})
	if err != nil {
		return fail(err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	v.inProcess = func() error {
		cancel()
		err := <-done
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		return err
	}
	rctx, rcancel := context.WithTimeout(ctx, 90*time.Second)
	defer rcancel()
	for !kubetest.NodeReady(rctx, cs, o.name) {
		select {
		case <-rctx.Done():
			return fail(fmt.Errorf("in-process node %s not Ready: %w", o.name, rctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return v, nil
}
