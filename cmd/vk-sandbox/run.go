package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/kube/kubeletapi"
	"github.com/cocoonstack/vk-sandbox/kube/vkcompat"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/agent"
	"github.com/cocoonstack/vk-sandbox/pool/store"
	"github.com/cocoonstack/vk-sandbox/telemetry"
)

func run(ctx context.Context, cfg *config, log *slog.Logger) error {
	tel, err := telemetry.Setup(ctx, telemetry.Config{Version: version, NodeName: cfg.NodeName})
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(sctx)
	}()

	// The state file is the only authority to destroy this node's VMs:
	// refuse to run without it (unwritable, locked or corrupt is fatal).
	st, err := store.Open(cfg.StatePath, store.Options{
		UnsafeNoFsync: cfg.UnsafeNoFsync, Observer: tel.Metrics.StoreObserver(), Logger: log,
	})
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("closing the state file", "path", cfg.StatePath, "error", err)
		}
	}()

	// The node key marks every claim of this node: it lives beside the
	// state file, made at the first start. A damaged one is fatal, never
	// replaced (a new key would disown every VM no row holds).
	nodeKey, err := st.NodeKey()
	if err != nil {
		return fmt.Errorf("node key: %w", err)
	}

	token, err := readToken(cfg.TokenFile)
	if err != nil {
		return err
	}
	sbx, err := pool.NewClient(pool.ClientOptions{
		BaseURL: cfg.SandboxdURL, Token: token, Observer: tel.Metrics.SandboxdObserver(),
		// Claims run on the engine's workers, deletes on virtual-kubelet's:
		// one idle connection for each, so a burst never redials.
		MaxIdleConns:   cfg.Shards*cfg.WorkersPerShard + cfg.VKWorkers,
		AttemptTimeout: cfg.SandboxdTimeout, ClaimTimeout: cfg.SandboxdClaimTimeout,
	})
	if err != nil {
		return fmt.Errorf("sandboxd client: %w", err)
	}
	relay := agent.New(sbx, int64(cfg.ExecBufferBudgetMiB)<<20)

	rc, err := restConfig(cfg)
	if err != nil {
		return err
	}
	rc.Wrap(telemetry.LogAPIServerFailures(log))
	tel.Metrics.MeterKubeClients() // before the first client is built
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	// /healthz, /readyz and /metrics are served before the holder lease is
	// taken: a process waiting for the apiserver (Holder.Acquire) answers
	// its liveness probe meanwhile, so the kubelet does not restart it into
	// a crash-loop backoff, and /readyz says what it waits for.
	var ready atomic.Pointer[func() (string, error)]
	waiting := func() (string, error) {
		return "node holder: not held yet (taking the holder lease; the log says why it waits)\n", errors.New("readyz check failed")
	}
	ready.Store(&waiting)
	if cfg.MetricsAddr != "" {
		stop, err := serveTelemetry(cfg, tel, func() (string, error) { return (*ready.Load())() }, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	// One process serves a node name: the holder lease is taken (or the
	// start refused) before the node is registered and before any claim.
	holder, err := acquireHolder(ctx, cfg, client, log)
	if err != nil {
		return err
	}
	recorder, stopEvents, err := eventRecorder(cfg, rc, tel.Metrics, log)
	if err != nil {
		return err
	}
	defer stopEvents()

	auth := &kube.Authorizer{Dynamic: dyn, Timeout: cfg.OwnerGetTimeout, Mapper: kube.NewOwnerMapper(client.Discovery())}

	labels, err := parseLabels(cfg.NodeLabels)
	if err != nil {
		return err
	}
	tlsCfg, err := kube.KubeletTLS(cfg.TLSCert, cfg.TLSKey, cfg.NodeName, cfg.NodeIP)
	if err != nil {
		return err
	}
	var clientCA []byte
	switch {
	case cfg.ClientCAFile != "":
		if clientCA, err = kube.LoadClientCA(cfg.ClientCAFile); err != nil {
			return err
		}
	case !cfg.UnsafeKubeletNoAuth:
		log.Warn("no --client-ca-file: the apiserver's kubelet client certificate is not verified, so kubectl exec, port-forward, logs and top through the apiserver are refused 401")
	}
	features := &featureWatch{sbx: sbx, log: log, metrics: tel.Metrics}
	loops := []func(context.Context, *kube.Daemon){
		func(ctx context.Context, d *kube.Daemon) {
			probeSandboxd(ctx, sbx, d.Provider(), d.Engine(), cfg.PodIPFallback, cfg.NodeIP, log)
		},
		func(ctx context.Context, d *kube.Daemon) {
			warnUntilReady(ctx, d.Node().Ready(), d.Node().Checks, rc.Host, log)
		},
	}
	if cfg.SandboxdDetect {
		loops = append(loops, func(ctx context.Context, _ *kube.Daemon) { features.run(ctx) })
	} else {
		features.off()
	}
	var inv *kube.InventoryPublisher
	if cfg.PublishInventory {
		inv = &kube.InventoryPublisher{Dynamic: dyn, Sandboxd: sbx, Node: cfg.NodeName, Address: cfg.AdvertiseAddr, Log: log, Metrics: tel.Metrics}
	}
	d, err := kube.NewDaemon(kube.DaemonConfig{
		Provider: kube.ProviderOptions{
			Authorizer: auth, Events: recorder, Log: log, PodClient: client.CoreV1(), Sandboxd: relay, NodeName: cfg.NodeName,
			Sessions:       kubeletapi.SessionLimits{PerPod: cfg.ExecMaxSessionsPerPod, PerNode: cfg.ExecMaxSessions, IdleTimeout: cfg.ExecIdleTimeout},
			Forwards:       kubeletapi.SessionLimits{PerPod: cfg.PortForwardMaxSessionsPerPod, PerNode: cfg.PortForwardMaxSessions},
			SessionRefused: tel.Metrics.SessionRefused,
		},
		Pipeline: pipeline.Config{
			Node: cfg.NodeName, NodeKey: nodeKey,
			Shards: cfg.Shards, Workers: cfg.WorkersPerShard, QueueDepth: cfg.QueueDepth,
			Sandboxd: sbx, Store: st, Observer: tel.Metrics, Logger: log,
			RequeueMax: cfg.RequeueMax, SettleWindow: cfg.SettleWindow,
			LeaseCheckInterval: cfg.LeaseCheckInterval, ReauthorizeInterval: cfg.ReauthorizeInterval,
			OrphanScanInterval: cfg.OrphanScanInterval, OrphanObserver: tel.Metrics,
		},
		Node: kube.NodeOptions{
			Name: cfg.NodeName, IP: cfg.NodeIP, ListenAddr: cfg.ListenAddr, Labels: labels,
			CPU: cfg.NodeCPU, Memory: cfg.NodeMemory, Pods: cfg.NodePods, TLS: tlsCfg, Version: version,
			Client: client, EventRecorder: vkcompat.QuietRecorder(recorder), Workers: cfg.VKWorkers, Metrics: tel.Metrics,
			RetryMax: cfg.RequeueMax, NoAuth: cfg.UnsafeKubeletNoAuth, ClientCA: clientCA,
			Health: kube.NodeHealthOptions{Sandboxd: sbx, PingInterval: cfg.SandboxdPingInterval, StateDir: filepath.Dir(cfg.StatePath), Log: log},
		},
		Inventory: inv, InventoryInterval: cfg.PublishInterval,
		Loops:           loops,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Log:             log,
	})
	if err != nil {
		return err
	}
	eng := d.Engine()
	tel.Metrics.RegisterBuildInfo(buildInfo())
	tel.Metrics.RegisterWorkers(cfg.Shards, cfg.WorkersPerShard)
	tel.Metrics.RegisterQueueDepth(eng.QueueDepths)
	tel.Metrics.RegisterClaims(eng.Counts)
	tel.Metrics.RegisterSessions(d.Provider().OpenSessions)
	tel.Metrics.RegisterExecBuffer(relay.BufferHeld)

	r := readiness(holder.check, d.Node().Checks, st.Health, features.notes)
	ready.Store(&r)

	log.Info("vk-sandbox starting", "node", cfg.NodeName, "sandboxd", cfg.SandboxdURL, "state", cfg.StatePath, "version", version,
		"holder", holder.identity)
	// Run returns once everything it started has ended; the deferred Close
	// then flushes the state file.
	return holder.serve(ctx, d.Run)
}

// serveTelemetry serves /metrics, /healthz and /readyz (ready) on
// --metrics-addr until stop.
func serveTelemetry(cfg *config, tel *telemetry.Telemetry, ready func() (string, error), log *slog.Logger) (stop func(), err error) {
	ln, err := telemetry.Listen(cfg.MetricsAddr, nil, telemetry.DefaultServerLimits())
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", cfg.MetricsAddr, err)
	}
	h := tel.HandlerWithDetail(ready)
	if cfg.Profiling {
		h = telemetry.WithProfiling(h)
	}
	srv := telemetry.NewServer(h, telemetry.DefaultServerLimits())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "addr", cfg.MetricsAddr, "error", err)
		}
	}()
	return func() { _ = srv.Close() }, nil
}

// restConfig follows client-go's loading rules, with in-cluster config
// placed before the home directory's file:
//  1. an explicit --kubeconfig;
//  2. $KUBECONFIG, a list of files merged as kubectl merges them;
//  3. the in-cluster service account, when running in a Pod;
//  4. ~/.kube/config.
//
// An explicit choice therefore always wins over the environment it runs in.
func restConfig(cfg *config) (*rest.Config, error) {
	rc, err := loadKubeconfig(cfg.Kubeconfig, os.Getenv("KUBECONFIG"), rest.InClusterConfig, clientcmd.RecommendedHomeFile)
	if err != nil {
		return nil, err
	}
	rc.QPS = float32(cfg.KubeAPIQPS)
	rc.Burst = cfg.KubeAPIBurst
	kube.UseContentType(rc, cfg.KubeAPIContentType)
	// The apiserver gzips each flush of a watch for a client that accepts
	// it, which costs CPU on both sides for a stream that stays inside the
	// cluster; compression is therefore off unless asked for.
	rc.DisableCompression = !cfg.KubeAPICompression
	rc.UserAgent = "vk-sandbox/" + version
	return rc, nil
}

func loadKubeconfig(explicit, envList string, inCluster func() (*rest.Config, error), home string) (*rest.Config, error) {
	fromFiles := func(rules *clientcmd.ClientConfigLoadingRules, what string) (*rest.Config, error) {
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig (%s): %w", what, err)
		}
		return rc, nil
	}
	switch {
	case explicit != "":
		return fromFiles(&clientcmd.ClientConfigLoadingRules{ExplicitPath: explicit}, "--kubeconfig "+explicit)
	case envList != "":
		return fromFiles(&clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(envList)}, "$KUBECONFIG "+envList)
	}
	if rc, err := inCluster(); err == nil {
		return rc, nil
	}
	if _, err := os.Stat(home); err == nil {
		return fromFiles(&clientcmd.ClientConfigLoadingRules{ExplicitPath: home}, home)
	}
	return nil, fmt.Errorf("kubeconfig: no --kubeconfig, no $KUBECONFIG, not in a cluster, and no %s", home)
}
