package pipeline_test

import (
	"testing"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
)

// A VM is this node's by its claim_ref, on every sandboxd version: a
// server without metadata (V1, V2) drops the labels. Where labels are kept
// they must not name another provider or node. sandbox-operator claims with
// the bare "<namespace>/<name>"; such a VM, and one made by another node,
// is never ours.
func TestIdentityOwnsByClaimRefAndLabelsNeverContradict(t *testing.T) {
	id := pipeline.Identity{Node: "n1"}
	ref := pipeline.PodRef{Key: "ns/a", UID: "uid-a", OwnerUID: "owner-a"}
	labels := id.Labels(ref)
	if err := pool.ValidateMetadata(labels); err != nil {
		t.Fatalf("labels outside sandboxd's bounds: %v", err)
	}
	if labels[pipeline.LabelPodUID] != "uid-a" || labels[pipeline.LabelOwnerUID] != "owner-a" || labels[pipeline.LabelNode] != "n1" {
		t.Fatalf("labels = %v", labels)
	}
	for name, s := range map[string]pool.Sandbox{
		"labels kept (V3+)":       {ClaimRef: id.ClaimRef("ns/a"), Metadata: labels},
		"labels dropped (V1, V2)": {ClaimRef: id.ClaimRef("ns/a")},
	} {
		if key, ok := id.Owns(s); !ok || key != "ns/a" {
			t.Errorf("%s: Owns = %q, %v; want ns/a", name, key, ok)
		}
		if !id.Selector("ns/a").Matches(s) {
			t.Errorf("%s: the selector does not match our own VM", name)
		}
	}
	other := pipeline.Identity{Node: "n2"}
	for name, s := range map[string]pool.Sandbox{
		"operator's bare claim_ref":    {ClaimRef: "ns/a"},
		"bare claim_ref, our labels":   {ClaimRef: "ns/a", Metadata: labels},
		"another node's VM":            {ClaimRef: other.ClaimRef("ns/a"), Metadata: other.Labels(ref)},
		"another node's, no labels":    {ClaimRef: other.ClaimRef("ns/a")},
		"our labels, other node's ref": {ClaimRef: other.ClaimRef("ns/a"), Metadata: labels},
		"our ref, other node's labels": {ClaimRef: id.ClaimRef("ns/a"), Metadata: other.Labels(ref)},
		"our ref, another provider":    {ClaimRef: id.ClaimRef("ns/a"), Metadata: map[string]string{pipeline.LabelManagedBy: "someone-else"}},
		"malformed key":                {ClaimRef: id.ClaimRef("a"), Metadata: labels},
	} {
		if key, ok := id.Owns(s); ok {
			t.Errorf("%s: Owns = %q, true; want false", name, key)
		}
	}
	if _, ok := id.Labels(pipeline.PodRef{Key: "ns/b", UID: "u"})[pipeline.LabelOwnerUID]; ok {
		t.Error("a bare Pod's claim carries an owner-uid label")
	}
}
