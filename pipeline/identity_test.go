package pipeline_test

import (
	"testing"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
)

// A VM is this node's only with both marks: its claim_ref and its labels.
// sandbox-operator claims with the bare "<namespace>/<name>"; such a VM,
// and one made by another node or carrying only one mark, is never ours.
func TestIdentityOwnsOnlyVMsCarryingBothMarks(t *testing.T) {
	id := pipeline.Identity{Node: "n1"}
	ref := pipeline.PodRef{Key: "ns/a", UID: "uid-a", OwnerUID: "owner-a"}
	labels := id.Labels(ref)
	if err := pool.ValidateMetadata(labels); err != nil {
		t.Fatalf("labels outside sandboxd's bounds: %v", err)
	}
	if labels[pipeline.LabelPodUID] != "uid-a" || labels[pipeline.LabelOwnerUID] != "owner-a" || labels[pipeline.LabelNode] != "n1" {
		t.Fatalf("labels = %v", labels)
	}
	ours := pool.Sandbox{ClaimRef: id.ClaimRef("ns/a"), Metadata: labels}
	if key, ok := id.Owns(ours); !ok || key != "ns/a" {
		t.Fatalf("Owns(our VM) = %q, %v", key, ok)
	}
	if !id.Selector("ns/a").Matches(ours) || !id.Selector("").Matches(ours) {
		t.Fatal("the selector does not match our own VM")
	}
	other := pipeline.Identity{Node: "n2"}
	for name, s := range map[string]pool.Sandbox{
		"operator's bare claim_ref":    {ClaimRef: "ns/a"},
		"bare claim_ref, our labels":   {ClaimRef: "ns/a", Metadata: labels},
		"our claim_ref, no labels":     {ClaimRef: id.ClaimRef("ns/a")},
		"another node's VM":            {ClaimRef: other.ClaimRef("ns/a"), Metadata: other.Labels(ref)},
		"our labels, other node's ref": {ClaimRef: other.ClaimRef("ns/a"), Metadata: labels},
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
