package main

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/kube/kubeletapi"
	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/agent"
)

// config is every flag of the binary. Each flag's default comes from its
// environment variable when that is set, so a flag on the command line
// always wins over the environment (the configuration rules (docs/configuration.md)).
type config struct {
	NodeName, NodeIP, ListenAddr string
	PodIPFallback                string
	TLSCert, TLSKey              string
	ClientCAFile                 string
	NodeCPU, NodeMemory          string
	NodePods                     int
	SandboxdURL, AdvertiseAddr   string
	TokenFile                    string
	StatePath                    string
	OrphanScanInterval           time.Duration
	ReauthorizeInterval          time.Duration
	SettleWindow                 time.Duration
	PublishInventory             bool
	PublishInterval              time.Duration
	NodeLabels                   string
	KubeAPIQPS                   float64
	KubeAPIContentType           string
	KubeAPICompression           bool
	Profiling                    bool
	NormalEvents                 bool
	EventQPS                     float64
	EventBurst                   int
	KubeAPIBurst                 int
	Kubeconfig                   string

	Shards, WorkersPerShard, QueueDepth    int
	VKWorkers                              int
	MetricsAddr                            string
	LogLevel                               string
	LogFormat                              string
	SandboxdPingInterval                   time.Duration
	RequeueMax                             time.Duration
	OwnerGetTimeout                        time.Duration
	SandboxdTimeout                        time.Duration
	SandboxdClaimTimeout                   time.Duration
	SandboxdDetect                         bool
	ExecMaxSessionsPerPod, ExecMaxSessions int
	ExecIdleTimeout                        time.Duration
	PortForwardMaxSessionsPerPod           int
	PortForwardMaxSessions                 int
	ExecBufferBudgetMiB                    int
	LeaseCheckInterval                     time.Duration
	ShutdownTimeout                        time.Duration
	UnsafeKubeletNoAuth                    bool
	UnsafeNoFsync                          bool
	Version                                bool
}

// Worker-count defaults: the flags' defaults, and what 0 or less means;
// the libraries own the values.
var (
	defaultShards          = pipeline.DefaultConfig().Shards
	defaultWorkersPerShard = pipeline.DefaultConfig().Workers
	defaultVKWorkers       = kube.DefaultNodeOptions().Workers
)

func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := newFlagSet()
	defineFlags(fs, c)
	if err := applyEnv(fs, os.LookupEnv); err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unknown command or argument %q: the commands are %s, and the daemon takes flags only", fs.Arg(0), commandNames)
	}
	return c, c.settle()
}

// defineFlags declares every flag of the binary into c.
func defineFlags(fs *flag.FlagSet, c *config) {
	// The default is this host's own (defaultNodeName): two hosts left at
	// the default never serve one Node. A host name that makes no valid
	// name leaves it empty, and settle says why.
	defName, _ := defaultNodeName(os.Hostname)
	fs.StringVar(&c.NodeName, "node-name", defName, "virtual node name; one process serves it at a time (default: the host name, lower-cased, with -sandboxd)")
	fs.StringVar(&c.NodeIP, "node-ip", "", "node InternalIP address")
	fs.StringVar(&c.PodIPFallback, "pod-ip-fallback", podIPFallbackAuto, "Pod IP of a claim whose owner_addr has no IP: auto (--node-ip, else sandboxd's advertise_addr, else the host's primary address), off, or an IP")
	fs.StringVar(&c.ListenAddr, "listen-addr", kube.DefaultNodeOptions().ListenAddr, "kubelet API listen address; its port is advertised as the kubelet endpoint")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "kubelet serving certificate (empty: self-signed P-256)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "kubelet serving key")
	fs.StringVar(&c.ClientCAFile, "client-ca-file", "", "PEM CA bundle that verifies kubelet API client certificates, such as the apiserver's kubelet client certificate (empty: bearer tokens only, so kubectl exec, port-forward, logs and top through the apiserver are refused)")
	fs.StringVar(&c.NodeCPU, "node-cpu", kube.DefaultNodeOptions().CPU, "node cpu capacity")
	fs.StringVar(&c.NodeMemory, "node-memory", kube.DefaultNodeOptions().Memory, "node memory capacity")
	fs.IntVar(&c.NodePods, "node-pods", kube.DefaultNodeOptions().Pods, "node pod capacity")
	fs.StringVar(&c.SandboxdURL, "sandboxd-url", "http://127.0.0.1:7777", "sandboxd base URL")
	fs.StringVar(&c.AdvertiseAddr, "sandboxd-advertise-addr", "", "sandboxd address published in NodeInventory (default: host:port of --sandboxd-url)")
	fs.StringVar(&c.TokenFile, "sandboxd-token-file", "", "file holding the sandboxd bearer token: the node's root api_token, or a tenant token (fewer features, see docs)")
	fs.StringVar(&c.StatePath, "state-path", "/var/lib/vk-sandbox/claims.json", "claim state file: the only authority to release this node's VMs (required, must be writable)")
	fs.DurationVar(&c.OrphanScanInterval, "orphan-scan-interval", 60*time.Second, "orphan audit interval; 0 disables (reports only, never releases)")
	fs.DurationVar(&c.ReauthorizeInterval, "reauthorize-interval", time.Minute, "how often the recorded owner of a claim held for a Pod that is gone (preserved, or its release failed) is asked again; a release verdict releases it. 0 disables")
	fs.DurationVar(&c.SettleWindow, "settle-window", pipeline.DefaultConfig().SettleWindow, "how long a VM this node made may stay undelivered (a claim that finished after its answer was lost) before the orphan scan releases it; keep it above --sandboxd-claim-timeout")
	fs.BoolVar(&c.PublishInventory, "publish-inventory", false, "server-side-apply a NodeInventory object for this node")
	fs.DurationVar(&c.PublishInterval, "publish-interval", 30*time.Second, "how often the NodeInventory is rebuilt from sandboxd; it is applied only when changed, and at least every 10 minutes")
	fs.StringVar(&c.NodeLabels, "node-labels", "sandbox.cocoonstack.io/runtime=sandboxd", "extra node labels, k=v[,k=v]; the built-in type and runtime labels are applied after them and cannot be overridden")
	fs.Float64Var(&c.KubeAPIQPS, "kube-api-qps", 1000, "client-side QPS limit towards the apiserver, per client; each Running Pod costs one status write")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", 2000, "client-side burst towards the apiserver, per client")
	fs.StringVar(&c.KubeAPIContentType, "kube-api-content-type", runtime.ContentTypeProtobuf, "encoding of requests to the apiserver and of its answers and watch events for built-in types: "+runtime.ContentTypeProtobuf+" or "+runtime.ContentTypeJSON+" (custom resources are always JSON)")
	fs.BoolVar(&c.KubeAPICompression, "kube-api-compression", false, "ask the apiserver to gzip its answers and watch streams; off by default: a node's own Pod watch is small and near, and compressing it costs CPU at both ends")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig file; it wins over $KUBECONFIG (a list of files), in-cluster config and ~/.kube/config, in that order")
	fs.IntVar(&c.Shards, "shards", defaultShards, "claim pipeline shards (queues keyed by Pod UID)")
	fs.IntVar(&c.WorkersPerShard, "workers-per-shard", defaultWorkersPerShard, "claim workers per shard")
	fs.IntVar(&c.QueueDepth, "queue-depth", 0, "Pods that may hold a claim intent per shard; at least --node-pods (0: --node-pods). A Pod finding its shard full is deferred, never waited for")
	fs.IntVar(&c.VKWorkers, "vk-workers", defaultVKWorkers, "virtual-kubelet sync/status workers")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", ":10261", "Prometheus /metrics, /healthz and /readyz listen address; empty disables")
	fs.BoolVar(&c.NormalEvents, "normal-events", true, "record Normal Events (SandboxClaimed, SandboxReleased, ...); false keeps only Warnings, one apiserver write less per claim")
	fs.Float64Var(&c.EventQPS, "event-qps", 50, "Normal Events recorded per second, on average (the kubelet's default); Events beyond the budget are shed and counted in vksandbox_events_shed_total, Warnings always pass. 0: no budget")
	fs.IntVar(&c.EventBurst, "event-burst", 100, "Normal Events that may be recorded at once before --event-qps paces them")
	fs.BoolVar(&c.Profiling, "profiling", false, "also serve Go's runtime profiles (/debug/pprof/) on --metrics-addr")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "json", "log line format: json (one object a line) or text (logfmt-style key=value)")
	fs.DurationVar(&c.SandboxdPingInterval, "sandboxd-ping-interval", kube.DefaultSandboxdPingInterval, "how often sandboxd's /healthz and /v1/info are asked for the node's SandboxdReady condition and sandboxd-unavailable taint; the Node is written only when the verdict changes")
	fs.DurationVar(&c.RequeueMax, "requeue-max", pipeline.DefaultConfig().RequeueMax, "cap of the per-Pod retry backoff: Pods that could not be claimed (capacity miss, errors), and failed status writes and final deletes")
	fs.DurationVar(&c.SandboxdTimeout, "sandboxd-timeout", pool.DefaultAttemptTimeout, "deadline of one sandboxd request attempt (list, get, release, renew, info), body included")
	fs.DurationVar(&c.SandboxdClaimTimeout, "sandboxd-claim-timeout", pool.DefaultClaimTimeout, "deadline of one claim attempt; cold claims take seconds, and a timed-out claim is looked up before any retry")
	fs.BoolVar(&c.SandboxdDetect, "sandboxd-detect", true, "learn what sandboxd supports (read-only probes at startup and every 5 minutes) and use only that; false treats every feature as unknown: each one is tried and its answer checked, which is safe but dearer and quieter on servers before V2 (for a proxy that refuses the probes)")
	fs.IntVar(&c.ExecMaxSessionsPerPod, "exec-max-sessions-per-pod", kubeletapi.DefaultSessionLimits().PerPod, "kubectl exec (and cp) sessions one Pod may have open at once; one more is refused")
	fs.IntVar(&c.ExecMaxSessions, "exec-max-sessions", kubeletapi.DefaultSessionLimits().PerNode, "kubectl exec (and cp) sessions the node may have open at once; one more is refused")
	fs.IntVar(&c.PortForwardMaxSessionsPerPod, "port-forward-max-sessions-per-pod", kubeletapi.DefaultForwardLimits().PerPod, "kubectl port-forward connections (one per forwarded TCP connection) one Pod may have open at once; one more is refused")
	fs.IntVar(&c.PortForwardMaxSessions, "port-forward-max-sessions", kubeletapi.DefaultForwardLimits().PerNode, "kubectl port-forward connections the node may have open at once; one more is refused")
	fs.IntVar(&c.ExecBufferBudgetMiB, "exec-buffer-budget-mib", agent.DefaultBufferBudget>>20, "MiB of guest output (silkd frames read for kubectl exec and cp) the node holds at once over all sessions; a session past it waits until bytes are written out. At least 16")
	fs.DurationVar(&c.ExecIdleTimeout, "exec-idle-timeout", kubeletapi.DefaultSessionLimits().IdleTimeout, "an exec, attach or port-forward connection that carried nothing for this long is closed, and its command killed (the kubelet's streaming idle timeout)")
	fs.DurationVar(&c.OwnerGetTimeout, "owner-get-timeout", kube.DefaultOwnerGetTimeout, "timeout of the owner GET on delete; a timeout preserves the VM")
	fs.DurationVar(&c.LeaseCheckInterval, "lease-check-interval", time.Second, "how often recorded lease deadlines are checked; a passed deadline triggers one sandboxd listing")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for in-flight claims")
	fs.BoolVar(&c.UnsafeKubeletNoAuth, "unsafe-kubelet-no-auth", false, "serve the kubelet API without TokenReview/SubjectAccessReview (tests only)")
	fs.BoolVar(&c.UnsafeNoFsync, "unsafe-no-fsync", false, "do not fsync the state file (benchmarks only: a crash loses release credentials)")
	fs.BoolVar(&c.Version, "version", false, "print the version and exit")
}

// settle applies the documented defaults that depend on other flags and
// checks what no single flag can.
func (c *config) settle() error {
	// "0 or less means the default" (docs/configuration.md), settled here
	// so the engine, the worker gauges and the client's idle pool agree.
	for _, w := range []struct {
		n   *int
		def int
	}{{&c.Shards, defaultShards}, {&c.WorkersPerShard, defaultWorkersPerShard}, {&c.VKWorkers, defaultVKWorkers}} {
		if *w.n <= 0 {
			*w.n = w.def
		}
	}
	if c.NodePods <= 0 {
		c.NodePods = kube.DefaultNodeOptions().Pods
	}
	if c.OwnerGetTimeout <= 0 {
		c.OwnerGetTimeout = kube.DefaultOwnerGetTimeout
	}
	if c.RequeueMax <= 0 {
		c.RequeueMax = pipeline.DefaultConfig().RequeueMax
	}
	// Every Pod the node admits must be able to hold an intent in whichever
	// shard its UID hashes to; otherwise Pods in retry (a capacity miss)
	// would defer new ones on a node well within its capacity.
	switch {
	case c.QueueDepth <= 0:
		c.QueueDepth = c.NodePods
	case c.QueueDepth < c.NodePods:
		return fmt.Errorf("--queue-depth %d is below --node-pods %d: each shard must have room for every Pod the node admits (leave it 0 for --node-pods)", c.QueueDepth, c.NodePods)
	}
	if c.AdvertiseAddr == "" {
		u, err := url.Parse(c.SandboxdURL)
		if err != nil || u.Host == "" {
			return fmt.Errorf("--sandboxd-url %q: not a URL with a host", c.SandboxdURL)
		}
		c.AdvertiseAddr = u.Host
	}
	if c.KubeAPIContentType != runtime.ContentTypeProtobuf && c.KubeAPIContentType != runtime.ContentTypeJSON {
		return fmt.Errorf("--kube-api-content-type %q: want %s or %s", c.KubeAPIContentType, runtime.ContentTypeProtobuf, runtime.ContentTypeJSON)
	}
	for name, d := range map[string]time.Duration{"--publish-interval": c.PublishInterval, "--lease-check-interval": c.LeaseCheckInterval,
		"--sandboxd-timeout": c.SandboxdTimeout, "--sandboxd-ping-interval": c.SandboxdPingInterval, "--sandboxd-claim-timeout": c.SandboxdClaimTimeout,
		"--settle-window": c.SettleWindow, "--exec-idle-timeout": c.ExecIdleTimeout} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive, got %s", name, d)
		}
	}
	// A claim may finish at sandboxd up to one claim attempt after its
	// caller gave up; the orphan scan must not release such a VM as
	// undelivered before the key's next lookup had a chance to recover it.
	if c.SettleWindow <= c.SandboxdClaimTimeout {
		return fmt.Errorf("--settle-window %s must exceed --sandboxd-claim-timeout %s: a VM whose claim answer was lost could be released as undelivered before its Pod's next attempt recovers it", c.SettleWindow, c.SandboxdClaimTimeout)
	}
	if c.EventQPS < 0 || c.EventBurst < 0 || (c.EventQPS > 0 && c.EventBurst == 0) {
		return fmt.Errorf("--event-qps %v --event-burst %d: both must be positive (--event-qps 0 removes the budget)", c.EventQPS, c.EventBurst)
	}
	if c.ExecMaxSessionsPerPod <= 0 || c.ExecMaxSessions <= 0 {
		return fmt.Errorf("--exec-max-sessions-per-pod %d --exec-max-sessions %d: both must be positive", c.ExecMaxSessionsPerPod, c.ExecMaxSessions)
	}
	if c.PortForwardMaxSessionsPerPod <= 0 || c.PortForwardMaxSessions <= 0 {
		return fmt.Errorf("--port-forward-max-sessions-per-pod %d --port-forward-max-sessions %d: both must be positive", c.PortForwardMaxSessionsPerPod, c.PortForwardMaxSessions)
	}
	if c.ExecBufferBudgetMiB < 2*agent.MaxFrame>>20 {
		return fmt.Errorf("--exec-buffer-budget-mib %d: at least %d, two frames at silkd's cap", c.ExecBufferBudgetMiB, 2*agent.MaxFrame>>20)
	}
	if c.ReauthorizeInterval < 0 {
		return fmt.Errorf("--reauthorize-interval must not be negative (0 disables)")
	}
	if c.OrphanScanInterval < 0 {
		return fmt.Errorf("--orphan-scan-interval must not be negative (0 disables)")
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		return fmt.Errorf("--log-format %q: want json or text", c.LogFormat)
	}
	if _, _, err := podIPFallback(c.PodIPFallback, c.NodeIP, func() ([]net.Addr, error) { return nil, nil }); err != nil {
		return err
	}
	if c.NodeName == "" {
		if _, err := defaultNodeName(os.Hostname); err != nil {
			return err
		}
		return fmt.Errorf("--node-name is empty")
	}
	if err := checkNodeName(c.NodeName); err != nil {
		return fmt.Errorf("--node-name: %w", err)
	}
	if strings.TrimSpace(c.StatePath) == "" {
		return fmt.Errorf("--state-path is required")
	}
	return nil
}

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--node-labels: %q is not k=v", kv)
		}
		out[k] = v
	}
	return out, nil
}

func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--sandboxd-token-file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
