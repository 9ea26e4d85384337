package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// config is every flag of the binary. Each flag's default comes from its
// environment variable when that is set, so a flag on the command line
// always wins over the environment (DESIGN §9).
type config struct {
	NodeName, NodeIP, ListenAddr string
	TLSCert, TLSKey              string
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
	KubeAPIBurst                 int
	Kubeconfig                   string

	Shards, WorkersPerShard, QueueDepth int
	VKWorkers                           int
	MetricsAddr                         string
	LogLevel                            string
	RequeueMax                          time.Duration
	OwnerGetTimeout                     time.Duration
	SandboxdTimeout                     time.Duration
	SandboxdClaimTimeout                time.Duration
	LeaseCheckInterval                  time.Duration
	ShutdownTimeout                     time.Duration
	DefaultRateLimiters                 bool
	UnsafeKubeletNoAuth                 bool
	UnsafeNoFsync                       bool
	Version                             bool
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && name != "" {
		return v
	}
	return def
}

// envInt reads an integer default from the environment. A value that does
// not parse is reported at startup rather than silently replaced.
func envInt(name string, def int) int {
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		envErrs = append(envErrs, fmt.Errorf("$%s=%q: not an integer", name, v))
		return def
	}
	return n
}

// envDuration reads a duration default from the environment, like envInt.
func envDuration(name string, def time.Duration) time.Duration {
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		envErrs = append(envErrs, fmt.Errorf("$%s=%q: not a duration", name, v))
		return def
	}
	return d
}

var envErrs []error

// Worker-count defaults: the flags' defaults, and what 0 or less means.
const (
	defaultShards          = 8
	defaultWorkersPerShard = 32
	defaultVKWorkers       = 64
)

func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("vk-sandbox", flag.ContinueOnError)
	fs.StringVar(&c.NodeName, "node-name", env("VK_NODE_NAME", "vk-sandboxd"), "virtual node name [VK_NODE_NAME]")
	fs.StringVar(&c.NodeIP, "node-ip", env("VK_NODE_IP", ""), "node InternalIP address [VK_NODE_IP]")
	fs.StringVar(&c.ListenAddr, "listen-addr", env("VK_LISTEN_ADDR", ":10260"), "kubelet API listen address; its port is advertised as the kubelet endpoint [VK_LISTEN_ADDR]")
	fs.StringVar(&c.TLSCert, "tls-cert", env("VK_TLS_CERT", ""), "kubelet serving certificate (empty: self-signed P-256) [VK_TLS_CERT]")
	fs.StringVar(&c.TLSKey, "tls-key", env("VK_TLS_KEY", ""), "kubelet serving key [VK_TLS_KEY]")
	fs.StringVar(&c.NodeCPU, "node-cpu", env("VK_NODE_CPU", "4000"), "node cpu capacity [VK_NODE_CPU]")
	fs.StringVar(&c.NodeMemory, "node-memory", env("VK_NODE_MEMORY", "8Ti"), "node memory capacity [VK_NODE_MEMORY]")
	fs.IntVar(&c.NodePods, "node-pods", envInt("VK_NODE_PODS", 2000), "node pod capacity [VK_NODE_PODS]")
	fs.StringVar(&c.SandboxdURL, "sandboxd-url", env("SANDBOXD_URL", "http://127.0.0.1:7777"), "sandboxd base URL [SANDBOXD_URL]")
	fs.StringVar(&c.AdvertiseAddr, "sandboxd-advertise-addr", env("SANDBOXD_ADVERTISE_ADDR", ""), "sandboxd address published in NodeInventory (default: host:port of --sandboxd-url) [SANDBOXD_ADVERTISE_ADDR]")
	fs.StringVar(&c.TokenFile, "sandboxd-token-file", env("SANDBOXD_TOKEN_FILE", ""), "file holding the sandboxd node token [SANDBOXD_TOKEN_FILE]")
	fs.StringVar(&c.StatePath, "state-path", env("VK_STATE_PATH", "/var/lib/vk-sandbox/claims.json"), "claim state file: the only authority to release this node's VMs (required, must be writable) [VK_STATE_PATH]")
	fs.DurationVar(&c.OrphanScanInterval, "orphan-scan-interval", 60*time.Second, "orphan audit interval; 0 disables (reports only, never releases)")
	fs.DurationVar(&c.ReauthorizeInterval, "reauthorize-interval", envDuration("VK_REAUTHORIZE_INTERVAL", time.Minute), "how often the recorded owner of a claim held for a Pod that is gone (preserved, or its release failed) is asked again; a release verdict releases it. 0 disables [VK_REAUTHORIZE_INTERVAL]")
	fs.DurationVar(&c.SettleWindow, "settle-window", envDuration("VK_SETTLE_WINDOW", 2*time.Minute), "how long a VM this node made may stay undelivered (a claim that finished after its answer was lost) before the orphan scan releases it; keep it above --sandboxd-claim-timeout [VK_SETTLE_WINDOW]")
	fs.BoolVar(&c.PublishInventory, "publish-inventory", false, "server-side-apply a NodeInventory object for this node")
	fs.DurationVar(&c.PublishInterval, "publish-interval", 30*time.Second, "NodeInventory publish interval")
	fs.StringVar(&c.NodeLabels, "node-labels", "sandbox.cocoonstack.io/runtime=sandboxd", "extra node labels, k=v[,k=v]")
	fs.Float64Var(&c.KubeAPIQPS, "kube-api-qps", 200, "client-side QPS limit towards the apiserver")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", 400, "client-side burst towards the apiserver")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", env("KUBECONFIG", ""), "kubeconfig path, used when not in-cluster [KUBECONFIG]")
	fs.IntVar(&c.Shards, "shards", envInt("VK_SHARDS", defaultShards), "claim pipeline shards (queues keyed by Pod UID) [VK_SHARDS]")
	fs.IntVar(&c.WorkersPerShard, "workers-per-shard", envInt("VK_WORKERS_PER_SHARD", defaultWorkersPerShard), "claim workers per shard [VK_WORKERS_PER_SHARD]")
	fs.IntVar(&c.QueueDepth, "queue-depth", envInt("VK_QUEUE_DEPTH", 0), "Pods that may hold a claim intent per shard; at least --node-pods (0: --node-pods). A Pod finding its shard full is deferred, never waited for [VK_QUEUE_DEPTH]")
	fs.IntVar(&c.VKWorkers, "vk-workers", envInt("VK_VK_WORKERS", defaultVKWorkers), "virtual-kubelet sync/status workers [VK_VK_WORKERS]")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", env("VK_METRICS_ADDR", ":10261"), "Prometheus /metrics, /healthz and /readyz listen address; empty disables [VK_METRICS_ADDR]")
	fs.StringVar(&c.LogLevel, "log-level", env("VK_LOG_LEVEL", "info"), "debug, info, warn or error [VK_LOG_LEVEL]")
	fs.DurationVar(&c.RequeueMax, "requeue-max", 30*time.Second, "cap of the slow retry for Pods that could not be claimed (capacity miss, errors)")
	fs.DurationVar(&c.SandboxdTimeout, "sandboxd-timeout", envDuration("SANDBOXD_TIMEOUT", pool.DefaultAttemptTimeout), "deadline of one sandboxd request attempt (list, get, release, renew, info), body included [SANDBOXD_TIMEOUT]")
	fs.DurationVar(&c.SandboxdClaimTimeout, "sandboxd-claim-timeout", envDuration("SANDBOXD_CLAIM_TIMEOUT", pool.DefaultClaimTimeout), "deadline of one claim attempt; cold claims take seconds, and a timed-out claim is looked up before any retry [SANDBOXD_CLAIM_TIMEOUT]")
	fs.DurationVar(&c.OwnerGetTimeout, "owner-get-timeout", 5*time.Second, "timeout of the owner GET on delete; a timeout preserves the VM")
	fs.DurationVar(&c.LeaseCheckInterval, "lease-check-interval", time.Second, "how often recorded lease deadlines are checked; a passed deadline triggers one sandboxd listing")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for in-flight claims")
	fs.BoolVar(&c.DefaultRateLimiters, "default-rate-limiters", false, "keep virtual-kubelet's 10 qps/100 burst queue limiter (benchmark comparison only)")
	fs.BoolVar(&c.UnsafeKubeletNoAuth, "unsafe-kubelet-no-auth", false, "serve the kubelet API without TokenReview/SubjectAccessReview (tests only)")
	fs.BoolVar(&c.UnsafeNoFsync, "unsafe-no-fsync", false, "do not fsync the state file (benchmarks only: a crash loses release credentials)")
	fs.BoolVar(&c.Version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if len(envErrs) > 0 {
		return nil, envErrs[0]
	}
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
		c.NodePods = 2000
	}
	// Every Pod the node admits must be able to hold an intent in whichever
	// shard its UID hashes to; otherwise Pods in retry (a capacity miss)
	// would defer new ones on a node well within its capacity.
	switch {
	case c.QueueDepth <= 0:
		c.QueueDepth = c.NodePods
	case c.QueueDepth < c.NodePods:
		return nil, fmt.Errorf("--queue-depth %d is below --node-pods %d: each shard must have room for every Pod the node admits (leave it 0 for --node-pods)", c.QueueDepth, c.NodePods)
	}
	if c.AdvertiseAddr == "" {
		u, err := url.Parse(c.SandboxdURL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("--sandboxd-url %q: not a URL with a host", c.SandboxdURL)
		}
		c.AdvertiseAddr = u.Host
	}
	for name, d := range map[string]time.Duration{"--publish-interval": c.PublishInterval, "--lease-check-interval": c.LeaseCheckInterval,
		"--sandboxd-timeout": c.SandboxdTimeout, "--sandboxd-claim-timeout": c.SandboxdClaimTimeout, "--settle-window": c.SettleWindow} {
		if d <= 0 {
			return nil, fmt.Errorf("%s must be positive, got %s", name, d)
		}
	}
	if c.ReauthorizeInterval < 0 {
		return nil, fmt.Errorf("--reauthorize-interval must not be negative (0 disables)")
	}
	if c.OrphanScanInterval < 0 {
		return nil, fmt.Errorf("--orphan-scan-interval must not be negative (0 disables)")
	}
	if strings.TrimSpace(c.StatePath) == "" {
		return nil, fmt.Errorf("--state-path is required")
	}
	return c, nil
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
