package kube

import (
	"context"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
)

// NodeInventoryGVR is the cluster-scoped inventory object (manifests/nodeinventory-crd.yaml).
var NodeInventoryGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "nodeinventories"}

// FieldManager owns the fields this node applies.
const FieldManager = "vk-sandbox"

// InventorySource is what the publisher reads from sandboxd.
type InventorySource interface {
	List(ctx context.Context, claimRef string) ([]pool.Sandbox, error)
	Info(ctx context.Context) (pool.Info, error)
}

// Claims looks up this node's own claim for a pod key.
type Claims interface {
	Claim(key string) (pipeline.ClaimView, bool)
}

// InventoryPublisher server-side-applies one NodeInventory per node. Each
// tick rebuilds it from live sandboxd state (the listing, not the claim
// table): one listing, one info and one apply per interval, whatever the
// claim count. A failed publish is logged; the next tick starts afresh.
type InventoryPublisher struct {
	Dynamic  dynamic.Interface
	Sandboxd InventorySource
	Claims   Claims
	Node     string
	Address  string
	Log      *slog.Logger
	Metrics  interface{ InventoryPublish(ok bool) }
}

// Run publishes now and then every interval until ctx ends.
func (p *InventoryPublisher) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := p.PublishOnce(ctx)
		if p.Metrics != nil {
			p.Metrics.InventoryPublish(err == nil)
		}
		if err != nil && ctx.Err() == nil {
			p.Log.Warn("NodeInventory publish failed; retried next tick", "node", p.Node, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PublishOnce builds and applies the inventory.
func (p *InventoryPublisher) PublishOnce(ctx context.Context) error {
	rows, err := p.Sandboxd.List(ctx, "")
	if err != nil {
		return err
	}
	info, err := p.Sandboxd.Info(ctx)
	if err != nil {
		return err
	}
	obj := p.build(rows, info)
	_, err = p.Dynamic.Resource(NodeInventoryGVR).Apply(ctx, p.Node, obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return err
}

func (p *InventoryPublisher) build(rows []pool.Sandbox, info pool.Info) *unstructured.Unstructured {
	entries := make([]any, 0, len(rows))
	for _, r := range rows {
		name := r.ClaimRef
		if name == "" {
			name = r.ID
		}
		phase := "Running"
		if r.Hibernated {
			phase = "Hibernated"
		}
		e := map[string]any{"name": name, "id": r.ID, "phase": phase, "deadline": r.Deadline.UTC().Format(time.RFC3339)}
		if r.ClaimRef != "" {
			e["claimRef"] = r.ClaimRef
			if c, ok := p.Claims.Claim(r.ClaimRef); ok && c.ID == r.ID {
				e["addr"] = c.Address // only from this node's own claim
			}
		}
		entries = append(entries, e)
	}
	pools := make([]any, 0, len(info.Pools))
	for _, pl := range info.Pools {
		pools = append(pools, map[string]any{
			"template": pl.Key.Template, "net": pl.Key.Net, "size": pl.Key.Size,
			"warm": int64(pl.Warm), "target": int64(pl.Target),
		})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": NodeInventoryGVR.GroupVersion().String(),
		"kind":       "NodeInventory",
		"metadata":   map[string]any{"name": p.Node},
		"spec": map[string]any{
			"node": p.Node, "address": p.Address, "entries": entries, "pools": pools,
		},
	}}
}
