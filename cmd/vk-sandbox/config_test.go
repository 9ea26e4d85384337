package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// Worker counts of 0 or less take their documented defaults, once, so that
// every consumer of the config (engine, gauges, idle pool) sees the same.
func TestWorkerCountsOfZeroOrLessTakeTheirDefaults(t *testing.T) {
	c, err := parseFlags([]string{"--shards=0", "--workers-per-shard=-1", "--vk-workers=0"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Shards != 8 || c.WorkersPerShard != 32 || c.VKWorkers != 64 {
		t.Fatalf("shards %d, workers per shard %d, vk workers %d; want 8, 32, 64", c.Shards, c.WorkersPerShard, c.VKWorkers)
	}
	c, err = parseFlags([]string{"--shards=2", "--workers-per-shard=4", "--vk-workers=16"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Shards != 2 || c.WorkersPerShard != 4 || c.VKWorkers != 16 {
		t.Fatalf("explicit counts changed: %d, %d, %d", c.Shards, c.WorkersPerShard, c.VKWorkers)
	}
}

// Every shard must have room for every Pod the node admits: the queue depth
// defaults to --node-pods, and a smaller one is refused at startup.
func TestQueueDepthIsCheckedAgainstNodePods(t *testing.T) {
	c, err := parseFlags([]string{"--node-pods=3000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.QueueDepth != 3000 {
		t.Fatalf("queue depth %d, want --node-pods (3000)", c.QueueDepth)
	}
	if _, err := parseFlags([]string{"--node-pods=3000", "--queue-depth=1024"}); err == nil {
		t.Fatal("a queue depth below --node-pods was accepted")
	}
	if c, err := parseFlags([]string{"--node-pods=100", "--queue-depth=500"}); err != nil || c.QueueDepth != 500 {
		t.Fatalf("queue depth above --node-pods: %v, %v", c, err)
	}
}

// A timeout of zero would make every sandboxd call fail at once.
func TestSandboxdTimeoutsMustBePositive(t *testing.T) {
	for _, arg := range []string{"--sandboxd-timeout=0s", "--sandboxd-claim-timeout=-1s"} {
		if _, err := parseFlags([]string{arg}); err == nil {
			t.Errorf("%s was accepted", arg)
		}
	}
}

// A VM whose claim answer was lost may finish up to one claim attempt
// after its caller gave up; the orphan scan may not call it undelivered
// sooner.
func TestSettleWindowMustExceedTheClaimTimeout(t *testing.T) {
	if _, err := parseFlags([]string{"--sandboxd-claim-timeout=3m", "--settle-window=2m"}); err == nil {
		t.Fatal("a settle window below the claim timeout was accepted")
	}
	if _, err := parseFlags([]string{"--sandboxd-claim-timeout=30s", "--settle-window=31s"}); err != nil {
		t.Fatalf("a settle window above the claim timeout was refused: %v", err)
	}
}

// An explicit --kubeconfig wins over $KUBECONFIG, which wins over in-cluster
// config, which wins over ~/.kube/config.
func TestKubeconfigResolutionOrder(t *testing.T) {
	dir := t.TempDir()
	write := func(name, server string) string { return writeKubeconfig(t, filepath.Join(dir, name), server) }
	explicit, env1, env2, home := write("explicit", "https://explicit:6443"), write("env1", "https://env1:6443"), write("env2", "https://env2:6443"), write("home", "https://home:6443")
	inCluster := func() (*rest.Config, error) { return &rest.Config{Host: "https://in-cluster:443"}, nil }
	notInCluster := func() (*rest.Config, error) { return nil, errors.New("not in a cluster") }
	for _, tc := range []struct {
		explicit, env string
		ic            func() (*rest.Config, error)
		home, want    string
	}{
		{explicit, env1, inCluster, home, "https://explicit:6443"},
		{"", env1 + string(os.PathListSeparator) + env2, inCluster, home, "https://env1:6443"},
		{"", "", inCluster, home, "https://in-cluster:443"},
		{"", "", notInCluster, home, "https://home:6443"},
	} {
		rc, err := loadKubeconfig(tc.explicit, tc.env, tc.ic, tc.home)
		if err != nil || rc.Host != tc.want {
			t.Errorf("explicit %q env %q: host %v, %v; want %s", tc.explicit, tc.env, rc, err, tc.want)
		}
	}
	if _, err := loadKubeconfig("", "", notInCluster, filepath.Join(dir, "absent")); err == nil {
		t.Error("no source at all was accepted")
	}
}

// Every flag but --kubeconfig and --version has an environment variable; a
// set variable is the default that the command line overrides, and a bad
// value is an error naming it.
func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	fs := newFlagSet()
	defineFlags(fs, &config{})
	fs.VisitAll(func(f *flag.Flag) {
		if envName(f.Name) == "" && f.Name != "kubeconfig" && f.Name != "version" {
			t.Errorf("--%s has no environment variable", f.Name)
		}
	})
	t.Setenv("VK_NODE_PODS", "3000")
	t.Setenv("VK_PUBLISH_INVENTORY", "true")
	c, err := parseFlags([]string{"--node-pods=4000"})
	if err != nil || c.NodePods != 4000 || !c.PublishInventory {
		t.Fatalf("flag over env: %+v, %v", c, err)
	}
	t.Setenv("VK_NODE_PODS", "many")
	if _, err := parseFlags(nil); err == nil || !strings.Contains(err.Error(), "VK_NODE_PODS") {
		t.Fatalf("a bad variable: %v, want an error naming it", err)
	}
}

// The client speaks protobuf by default (and still accepts JSON); JSON can
// be asked for; anything else is refused at startup.
func TestKubeAPIContentType(t *testing.T) {
	p := writeKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), "https://k:6443")
	for _, tc := range []struct {
		args                []string
		content, acceptable string
	}{
		{nil, "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"},
		{[]string{"--kube-api-content-type=application/json"}, "application/json", "application/json"},
	} {
		rc := restConfigOf(t, append([]string{"--kubeconfig=" + p}, tc.args...)...)
		if rc.ContentType != tc.content || rc.AcceptContentTypes != tc.acceptable {
			t.Errorf("%v: content type %q, accept %q; want %q, %q", tc.args, rc.ContentType, rc.AcceptContentTypes, tc.content, tc.acceptable)
		}
	}
}

// Compression is off unless asked for: the apiserver then sends the watch
// plain instead of gzipping every flush.
func TestKubeAPICompression(t *testing.T) {
	p := writeKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), "https://k:6443")
	for _, tc := range []struct {
		args    []string
		disable bool
	}{
		{nil, true},
		{[]string{"--kube-api-compression"}, false},
	} {
		rc := restConfigOf(t, append([]string{"--kubeconfig=" + p}, tc.args...)...)
		if rc.DisableCompression != tc.disable {
			t.Errorf("%v: DisableCompression = %v, want %v", tc.args, rc.DisableCompression, tc.disable)
		}
	}
	if _, err := parseFlags([]string{"--kube-api-content-type=application/yaml"}); err == nil || !strings.Contains(err.Error(), "--kube-api-content-type") {
		t.Errorf("application/yaml: %v, want an error naming the flag", err)
	}
}

// restConfigOf is the apiserver client configuration the binary builds
// from args.
func restConfigOf(t *testing.T, args ...string) *rest.Config {
	t.Helper()
	c, err := parseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := restConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// writeKubeconfig writes, at p, a kubeconfig for server with a bearer
// token, and returns p.
func writeKubeconfig(t *testing.T, p, server string) string {
	t.Helper()
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server +
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The Event budget is on by default at the kubelet's figures; 0 removes
// it, and a budget that could never record anything is refused.
func TestEventBudgetFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.EventQPS != 50 || c.EventBurst != 100 {
		t.Fatalf("default budget %v/s burst %d, want 50/s burst 100", c.EventQPS, c.EventBurst)
	}
	if _, err := parseFlags([]string{"--event-qps=0"}); err != nil {
		t.Fatalf("--event-qps=0 (no budget) refused: %v", err)
	}
	for _, args := range [][]string{{"--event-qps=-1"}, {"--event-burst=-1"}, {"--event-qps=5", "--event-burst=0"}} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v was accepted", args)
		}
	}
}
