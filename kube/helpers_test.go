package kube

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/types"

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
