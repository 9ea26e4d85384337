package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
)

func writeToken(t *testing.T, name, tok string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// With only the required flag, the Config is the real server's.
func TestDefaultFlagsAreTheRealServer(t *testing.T) {
	o, err := parseFlags([]string{"--token-file", writeToken(t, "root", "r00t")})
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.RootToken != "r00t" || c.DefaultTTL != 5*time.Minute || c.MaxTTL != 24*time.Hour ||
		c.OwnerAddrMode != sim.OwnerAddrIP || c.Mesh || c.Capacity != "" || c.MetricsNoAuth ||
		c.FinishDetachedClaims || c.LoseAnswerRate != 0 || c.APIVersion != sim.V5 || c.TenantDBDown || len(c.TenantTokens) != 0 {
		t.Errorf("defaults %+v", c)
	}
	if !maps.Equal(c.Pools, map[pool.Key]int{{Template: "default"}: 64}) {
		t.Errorf("pools %v", c.Pools)
	}
	s := simtest.Start(t, c).Sim
	if s.OwnerAddr() != "10.77.0.1:7777" {
		t.Errorf("owner_addr %q", s.OwnerAddr())
	}
}

func TestFlagsReachTheConfig(t *testing.T) {
	o, err := parseFlags([]string{
		"--token-file", writeToken(t, "root", "r00t"),
		"--tenant-token-file", "acme=" + writeToken(t, "acme", "acme-tok"),
		"--tenant-token-file", "globex=" + writeToken(t, "globex", "globex-tok"),
		"--tenant-max-claims", "3", "--tenant-db-down", "--tenant-db-retry-after", "4s",
		"--mesh", "--peers", "10.0.0.6:7777, 10.0.0.7:7777", "--peer-templates", "py,rb",
		"--owner-addr-mode", "origin", "--owner-addr", "https://sbx.example:8443",
		"--default-ttl", "1m", "--max-ttl", "3s", "--provision-latency", "2s",
		"--finish-detached-claims", "--lose-answer-rate", "0.25", "--api-version", "V4", "--metrics-no-auth", "--draining",
	})
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if !maps.Equal(c.TenantTokens, map[string]string{"acme-tok": "acme", "globex-tok": "globex"}) {
		t.Errorf("tenants %v", c.TenantTokens)
	}
	if c.TenantMaxClaims != 3 || !c.TenantDBDown || c.TenantDBRetryAfter != 4*time.Second || !c.Mesh ||
		!slices.Equal(c.Redirect, []string{"10.0.0.6:7777", "10.0.0.7:7777"}) || !slices.Equal(c.PeerTemplates, []string{"py", "rb"}) ||
		c.OwnerAddrMode != "origin" || c.OwnerAddr != "https://sbx.example:8443" || c.DefaultTTL != time.Minute ||
		c.MaxTTL != 3*time.Second || c.ProvisionLatency != 2*time.Second || !c.FinishDetachedClaims ||
		c.LoseAnswerRate != 0.25 || c.APIVersion != sim.V4 ||
		!c.MetricsNoAuth || !c.Draining {
		t.Errorf("config %+v", c)
	}
}

func TestBadTenantFlagsAreErrors(t *testing.T) {
	root := writeToken(t, "root", "r00t")
	same := writeToken(t, "same", "shared")
	for name, args := range map[string][]string{
		"no name=path":   {"--tenant-token-file", "acme"},
		"missing file":   {"--tenant-token-file", "acme=/nonexistent/token"},
		"one token, two": {"--tenant-token-file", "a=" + same, "--tenant-token-file", "b=" + same},
		"stray argument": {"extra"},
	} {
		if _, err := parseFlags(append([]string{"--token-file", root}, args...)); err == nil {
			t.Errorf("%s: parseFlags accepted %v", name, args)
		}
	}
	if _, err := parseFlags(nil); err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Errorf("no --token-file: %v", err)
	}
}
