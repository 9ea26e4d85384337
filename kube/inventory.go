package kube

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
)

// NodeInventoryGVR is the cluster-scoped inventory object. Its CRD is
// sandbox-operator's, which reads it; this project does not ship one. A
// func, not a var, so that no caller can point the node elsewhere.
func NodeInventoryGVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "nodeinventories"}
}

// fieldManager owns the fields this node applies.
const fieldManager = "vk-sandbox"

// inventorySource is what the publisher reads from sandboxd.
type inventorySource interface {
	List(ctx context.Context, o pool.ListOptions) ([]pool.Sandbox, error)
	Info(ctx context.Context) (pool.Info, error)
	Tenant() bool
}

// claimTable is this node's claim table.
type claimTable interface {
	Lookup(key pipeline.PodKey) (pipeline.ClaimView, bool)
	Range(fn func(key pipeline.PodKey, c pipeline.ClaimView) bool)
	Identity() pipeline.Identity
}

// defaultInventoryResync is how often InventoryPublisher applies an
// inventory that has not changed.
const defaultInventoryResync = 10 * time.Minute

// InventoryPublisher server-side-applies one NodeInventory per node. Each
// tick rebuilds it: its entries are this node's claim table, which is
// right on every sandboxd version (a listing of an older server carries no
// metadata to tell this node's VMs by, and a tenant token's listing shows
// only some), with the listing consulted only for which VMs are hibernated;
// its pools come from /v1/info. One listing and one info per interval,
// whatever the claim count,
// and one apply when the object differs from the last one applied, or
// when Resync has passed since (which repairs an object that someone else
// edited or deleted). An idle node therefore sends the apiserver nothing
// for its inventory between resyncs. A failed publish is logged; the next
// tick starts afresh and applies.
//
// The object is spec-less, as its consumer (sandbox-operator's aggregated
// apiserver) reads it: node, address, entries and pools sit at the top
// level beside metadata. Fields nested under spec would be invisible to it,
// and a structural CRD would prune them without an error.
type InventoryPublisher struct {
	Dynamic  dynamic.Interface
	Sandboxd inventorySource
	Node     string
	Address  string
	Log      *slog.Logger
	Metrics  interface{ InventoryPublish(ok bool) }
	// Resync: 0 is defaultInventoryResync.
	Resync time.Duration

	// claims is the daemon's engine: NewDaemon sets it.
	claims claimTable

	// What the last successful apply sent, and when. Only the goroutine
	// that calls run (or publishOnce) touches them.
	last   map[string]any
	lastAt time.Time
	now    func() time.Time // time.Now; tests set it
}

// run publishes now and then every interval until ctx ends.
func (p *InventoryPublisher) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := p.publishOnce(ctx)
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

// publishOnce builds and applies the inventory. With a tenant token the
// pool view (/v1/info, root only) is left out rather than asked for.
func (p *InventoryPublisher) publishOnce(ctx context.Context) error {
	rows, err := p.Sandboxd.List(ctx, pool.ListOptions{})
	if err != nil {
		return err
	}
	var info *pool.Info
	if !p.Sandboxd.Tenant() {
		i, err := p.Sandboxd.Info(ctx)
		switch {
		case err == nil:
			info = &i
		case !errors.Is(err, pool.ErrForbidden):
			return err
		}
	}
	obj := p.build(rows, info)
	now := time.Now
	if p.now != nil {
		now = p.now
	}
	resync := cmp.Or(p.Resync, defaultInventoryResync)
	if p.last != nil && now().Sub(p.lastAt) < resync && equality.Semantic.DeepEqual(p.last, obj.Object) {
		return nil
	}
	p.last = nil // a failed apply must not make the next tick skip
	if err := p.apply(ctx, obj); err != nil {
		return err
	}
	p.last, p.lastAt = obj.Object, now()
	return nil
}

// apply server-side-applies obj with strict field validation: a field the
// consumer's schema does not have is an error here, not a silent prune.
func (p *InventoryPublisher) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = p.Dynamic.Resource(NodeInventoryGVR()).Patch(ctx, p.Node, types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager: fieldManager, Force: &force, FieldValidation: metav1.FieldValidationStrict,
	})
	return err
}

// build renders the object. Entries are the claim table's rows, in the
// fields its consumer (sandbox-operator) reads and no others:
// {name: the Pod key, id, phase, claimRef, addr, deadline}. A row still
// quarantined (not yet vouched for) is Pending, which the consumer does not
// take for ready; a hibernated VM is Hibernated.
func (p *InventoryPublisher) build(rows []pool.Sandbox, info *pool.Info) *unstructured.Unstructured {
	listed := make(map[string]pool.Sandbox, len(rows))
	for _, r := range rows {
		listed[r.ID] = r
	}
	var entries []any
	p.claims.Range(func(key pipeline.PodKey, c pipeline.ClaimView) bool {
		phase := "Running"
		r, isListed := listed[c.ID]
		switch v, _ := p.claims.Lookup(key); {
		case v.ID != c.ID:
			return true // replaced since the range began
		case v.State == pipeline.StateQuarantined:
			phase = "Pending"
		case isListed && r.Hibernated:
			phase = "Hibernated"
		}
		e := map[string]any{"name": string(key), "id": c.ID, "phase": phase}
		if isListed && r.ClaimRef != "" {
			e["claimRef"] = r.ClaimRef
		}
		if c.Address != "" {
			e["addr"] = c.Address
		}
		if !c.Deadline.IsZero() {
			e["deadline"] = c.Deadline.UTC().Format(time.RFC3339)
		}
		entries = append(entries, e)
		return true
	})
	if entries == nil {
		entries = []any{}
	}
	// In a stable order, so that an unchanged inventory compares equal
	// however the table or sandboxd orders its rows.
	slices.SortFunc(entries, func(a, b any) int {
		x, y := a.(map[string]any), b.(map[string]any)
		return cmp.Or(cmp.Compare(x["name"].(string), y["name"].(string)), cmp.Compare(x["id"].(string), y["id"].(string)))
	})
	obj := map[string]any{
		"apiVersion": NodeInventoryGVR().GroupVersion().String(),
		"kind":       "NodeInventory",
		"metadata":   map[string]any{"name": p.Node},
		"node":       p.Node,
		"address":    p.Address,
		"entries":    entries,
	}
	if info != nil {
		pools := make([]any, 0, len(info.Pools))
		byKey := slices.SortedFunc(slices.Values(info.Pools), func(a, b pool.PoolInfo) int {
			return cmp.Or(cmp.Compare(a.Key.Template, b.Key.Template), cmp.Compare(a.Key.Net, b.Key.Net), cmp.Compare(a.Key.Size, b.Key.Size))
		})
		for _, pl := range byKey {
			pools = append(pools, map[string]any{
				"template": pl.Key.Template, "net": pl.Key.Net, "size": pl.Key.Size,
				"warm": int64(pl.Warm), "target": int64(pl.Target),
			})
		}
		obj["pools"] = pools
	}
	return &unstructured.Unstructured{Object: obj}
}
