package sim_test

import (
	"maps"
	"testing"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

func TestParsePoolsReadsTemplateNetSizeTriples(t *testing.T) {
	got, err := sim.ParsePools(" default=64, py/bridge/small=8,go//large=0,rb/host=2 ")
	if err != nil {
		t.Fatal(err)
	}
	want := map[pool.Key]int{
		{Template: "default"}:                          64,
		{Template: "py", Net: "bridge", Size: "small"}: 8,
		{Template: "go", Size: "large"}:                0,
		{Template: "rb", Net: "host"}:                  2,
	}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestParsePoolsRejectsMalformedEntries(t *testing.T) {
	for _, in := range []string{"default", "default=x", "default=-1", "=3", "a/b/c/d=1", "a=1,a=2"} {
		if _, err := sim.ParsePools(in); err == nil {
			t.Errorf("ParsePools(%q): want an error", in)
		}
	}
}

func TestNewRejectsAnUnusableConfig(t *testing.T) {
	for name, cfg := range map[string]sim.Config{
		"no root token": {},
		"capacity mode": {RootToken: "r", Capacity: "drop"},
		"fail rate":     {RootToken: "r", FailRate: 1.5},
		"max claims":    {RootToken: "r", MaxClaims: -1},
		"addr prefix":   {RootToken: "r", AddrPrefix: "10.1.2.3."},
		"pool":          {RootToken: "r", Pools: map[pool.Key]int{{}: 1}},
		"pool twice":    {RootToken: "r", Pools: map[pool.Key]int{{Template: "a"}: 1, {Template: "a", Net: "none", Size: "small"}: 2}},
		"owner mode":    {RootToken: "r", OwnerAddrMode: "ipv6"},
		"owner none":    {RootToken: "r", OwnerAddrMode: sim.OwnerAddrNone, OwnerAddr: "10.0.0.1:7777"},
		"owner perclm":  {RootToken: "r", OwnerAddrMode: sim.OwnerAddrPerClaim, OwnerAddr: "10.0.0.1:7777"},
		"tenant max":    {RootToken: "r", TenantMaxClaims: -1},
		"ttl":           {RootToken: "r", MaxTTL: -time.Second},
		"tenant root":   {RootToken: "r", TenantTokens: map[string]string{"r": "acme"}},
		"tenant name":   {RootToken: "r", TenantTokens: map[string]string{"t": ""}},
		"tenant token":  {RootToken: "r", TenantTokens: map[string]string{"": "acme"}},
		"node token":    {RootToken: "r", NodeToken: "t", TenantTokens: map[string]string{"t": "acme"}},
	} {
		if s, err := sim.New(cfg); err == nil {
			_ = s.Close()
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

// The zero Config is the real server: one node-wide address, no mesh, the
// real lease bounds.
func TestZeroConfigIsTheRealServer(t *testing.T) {
	s, err := sim.New(sim.Config{RootToken: "r"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.OwnerAddr(); got != "10.77.0.1:7777" {
		t.Errorf("OwnerAddr %q", got)
	}
	if sim.DefaultTTL != 5*time.Minute || sim.MaxTTL != 24*time.Hour {
		t.Errorf("DefaultTTL %v MaxTTL %v", sim.DefaultTTL, sim.MaxTTL)
	}
}

func TestAddTenantRejectsTheRootToken(t *testing.T) {
	s, err := sim.New(sim.Config{RootToken: "r"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer func() {
		if recover() == nil {
			t.Error("AddTenant accepted the root token")
		}
	}()
	s.AddTenant("r", "acme")
}
