package kube

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

type fakeClaims struct {
	id   pipeline.Identity
	rows map[string]store.Claim
}

func (f fakeClaims) Identity() pipeline.Identity { return f.id }
func (f fakeClaims) Lookup(key pipeline.PodKey) (pipeline.ClaimView, bool) {
	c, ok := f.rows[string(key)]
	st := pipeline.StateDurable
	if c.Owner == "quarantined" {
		st = pipeline.StateQuarantined
	}
	return pipeline.ClaimView{ID: c.ID, Address: c.Address, PodUID: c.PodUID, Deadline: c.Deadline, State: st}, ok
}
func (f fakeClaims) Range(fn func(pipeline.PodKey, pipeline.ClaimView) bool) {
	for k := range f.rows {
		v, _ := f.Lookup(pipeline.PodKey(k))
		if !fn(pipeline.PodKey(k), v) {
			return
		}
	}
}

// The object is spec-less (its consumer reads the top level), and its
// entries are this node's claim table in exactly the consumer's fields:
// {name, id, phase, claimRef, addr, deadline}. Another client's VM in the
// listing is not an entry; a row the listing lacks (an older server, a
// tenant's partial view) still is, and a quarantined one is Pending.
func TestInventoryEntriesAreTheClaimTableInTheConsumersFields(t *testing.T) {
	id := pipeline.Identity{Node: "n1"}
	dl := time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)
	rows := []pool.Sandbox{
		{ID: "sb_a", Key: pool.Key{Template: "py"}, ClaimRef: claimRefOf(id, "ns/a", "uid-a"), Deadline: dl},
		{ID: "sb_old", Key: pool.Key{Template: "py"}, ClaimRef: "ns/old", Deadline: dl, Hibernated: true},
		{ID: "sb_op", Key: pool.Key{Template: "py"}, ClaimRef: "ns/a", Deadline: dl},
	}
	claims := fakeClaims{id: id, rows: map[string]store.Claim{
		"ns/a":        {ID: "sb_a", Address: "10.0.0.5:7777", Deadline: dl},
		"ns/old":      {ID: "sb_old", Address: "10.0.0.5:7777", Deadline: dl},
		"ns/unlisted": {ID: "sb_u", Address: "10.0.0.5:7777", Deadline: dl},
		"ns/q":        {ID: "sb_q", Deadline: dl, Owner: "quarantined"},
	}}
	p := &InventoryPublisher{claims: claims, Node: "n1", Address: "127.0.0.1:7777"}
	obj := p.build(rows, &pool.Info{Pools: []pool.PoolInfo{{Key: pool.Key{Template: "py", Net: "none", Size: "small"}, Warm: 3, Target: 4}}}).Object
	if _, ok := obj["spec"]; ok {
		t.Fatal("the object nests fields under spec; its consumer reads the top level")
	}
	if obj["node"] != "n1" || obj["address"] != "127.0.0.1:7777" {
		t.Fatalf("node/address = %v/%v", obj["node"], obj["address"])
	}
	want := []map[string]any{
		{"name": "ns/a", "id": "sb_a", "phase": "Running", "claimRef": claimRefOf(id, "ns/a", "uid-a"), "addr": "10.0.0.5:7777", "deadline": "2026-12-03T11:00:00Z"},
		{"name": "ns/old", "id": "sb_old", "phase": "Hibernated", "claimRef": "ns/old", "addr": "10.0.0.5:7777", "deadline": "2026-12-03T11:00:00Z"},
		{"name": "ns/q", "id": "sb_q", "phase": "Pending", "deadline": "2026-12-03T11:00:00Z"},
		{"name": "ns/unlisted", "id": "sb_u", "phase": "Running", "addr": "10.0.0.5:7777", "deadline": "2026-12-03T11:00:00Z"},
	}
	entries := obj["entries"].([]any)
	if len(entries) != len(want) {
		t.Fatalf("entries = %v, want the table's %d rows and not the operator's sb_op", entries, len(want))
	}
	for i, w := range want {
		e := entries[i].(map[string]any)
		if len(e) != len(w) {
			t.Errorf("entry %d = %v, want exactly %v", i, e, w)
		}
		for k, v := range w {
			if e[k] != v {
				t.Errorf("entry %d: %s = %v, want %v", i, k, e[k], v)
			}
		}
	}
	if pools := obj["pools"].([]any); len(pools) != 1 || pools[0].(map[string]any)["warm"] != int64(3) {
		t.Errorf("pools = %v", obj["pools"])
	}
	if _, ok := p.build(rows, nil).Object["pools"]; ok {
		t.Error("without the pool view (tenant token) the object still carries pools")
	}
}

// claimRefOf is id's claim_ref for the Pod generation (key, uid). The
// tests' UIDs are well formed; an empty claim_ref would fail their
// comparisons anyway.
func claimRefOf(id pipeline.Identity, key pipeline.PodKey, uid string) string {
	ref, _ := id.ClaimRef(key, uid)
	return ref
}

// An idle node does not re-apply an unchanged inventory every tick: it
// applies when the object changed (in any order sandboxd lists it), or
// once Resync has passed, and again after a failed apply.
func TestInventoryIsAppliedOnlyWhenChangedOrResyncDue(t *testing.T) {
	id := pipeline.Identity{Node: "n1"}
	row := func(name, sb string) pool.Sandbox {
		return pool.Sandbox{ID: sb, Key: pool.Key{Template: "py"}, ClaimRef: claimRefOf(id, pipeline.PodKey(name), "u-"+sb), Metadata: id.Labels(pipeline.PodRef{Key: pipeline.PodKey(name), UID: "u-" + sb})}
	}
	src := &fakeInventorySource{rows: []pool.Sandbox{row("ns/a", "sb_a"), row("ns/b", "sb_b")}}
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	applies, fail := 0, false
	dyn.PrependReactor("patch", "nodeinventories", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, errors.New("apiserver down")
		}
		applies++
		return true, &unstructured.Unstructured{}, nil
	})
	clock := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	table := map[string]store.Claim{"ns/a": {ID: "sb_a"}, "ns/b": {ID: "sb_b"}}
	p := &InventoryPublisher{Dynamic: dyn, Sandboxd: src, claims: fakeClaims{id: id, rows: table}, Node: "n1", Resync: time.Minute,
		now: func() time.Time { return clock }}
	publish := func(want int, what string) {
		t.Helper()
		if err := p.publishOnce(t.Context()); err != nil && !fail {
			t.Fatalf("%s: %v", what, err)
		}
		if applies != want {
			t.Fatalf("%s: %d applies, want %d", what, applies, want)
		}
	}
	publish(1, "first publish")
	clock = clock.Add(30 * time.Second)
	publish(1, "unchanged, before resync")
	src.rows = []pool.Sandbox{src.rows[1], src.rows[0]}
	publish(1, "same rows listed in another order")
	src.rows = append(src.rows, row("ns/c", "sb_c"))
	table["ns/c"] = store.Claim{ID: "sb_c"}
	publish(2, "a new VM")
	clock = clock.Add(59 * time.Second)
	publish(2, "unchanged, 59s after the last apply")
	clock = clock.Add(time.Second)
	publish(3, "unchanged, resync due")
	src.rows = src.rows[:2]
	delete(table, "ns/c")
	fail = true
	publish(3, "a failed apply")
	fail = false
	src.rows = append(src.rows, row("ns/c", "sb_c"))
	table["ns/c"] = store.Claim{ID: "sb_c"}
	publish(4, "back to the last applied object after a failed apply")
}
