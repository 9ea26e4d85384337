package kube

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
)

func typesUID(s string) types.UID { return types.UID(s) }

type fakeInventorySource struct{ rows []pool.Sandbox }

func (f *fakeInventorySource) List(context.Context, pool.ListOptions) ([]pool.Sandbox, error) {
	return slices.Clone(f.rows), nil
}

func (f *fakeInventorySource) Info(context.Context) (pool.Info, error) {
	return pool.Info{Pools: []pool.PoolInfo{{Key: pool.Key{Template: "b"}, Warm: 1}, {Key: pool.Key{Template: "a"}, Warm: 2}}}, nil
}

func (f *fakeInventorySource) Tenant() bool { return false }

// providerOver builds a provider over a fixed engine (one that does not
// report to it).
func providerOver(t testing.TB, eng claimEngine, o ProviderOptions) *Provider {
	t.Helper()
	p, err := newProvider(o, func(pipeline.Reporter) (claimEngine, error) { return eng, nil })
	if err != nil {
		t.Fatal(err)
	}
	return p
}
