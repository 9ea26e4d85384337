package sim_test

import (
	"maps"
	"testing"

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
	} {
		if s, err := sim.New(cfg); err == nil {
			_ = s.Close()
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}
