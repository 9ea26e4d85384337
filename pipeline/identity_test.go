package pipeline_test

import (
	"strings"
	"testing"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
)

// A VM is this node's by its claim_ref's mark, on every sandboxd version: a
// server without metadata (V1, V2) drops the labels. Where labels are kept
// they must not name another provider or node. sandbox-operator claims with
// the bare "<namespace>/<name>"; such a VM, and one made by another node,
// is never ours.
func TestIdentityOwnsByClaimRefAndLabelsNeverContradict(t *testing.T) {
	id := testID
	ref := pipeline.PodRef{Key: "ns/a", UID: "uid-a", OwnerUID: "owner-a"}
	labels := id.Labels(ref)
	if err := pool.ValidateMetadata(labels); err != nil {
		t.Fatalf("labels outside sandboxd's bounds: %v", err)
	}
	if labels[pipeline.LabelPodUID] != "uid-a" || labels[pipeline.LabelOwnerUID] != "owner-a" || labels[pipeline.LabelNode] != testNode {
		t.Fatalf("labels = %v", labels)
	}
	for name, s := range map[string]pool.Sandbox{
		"labels kept (V3+)":       {ClaimRef: id.ClaimRef("ns/a"), Metadata: labels},
		"labels dropped (V1, V2)": {ClaimRef: id.ClaimRef("ns/a")},
	} {
		if key, ok := id.Owns(s, true); !ok || key != "ns/a" {
			t.Errorf("%s: Owns = %q, %v; want ns/a", name, key, ok)
		}
		if !id.Selector("ns/a").Matches(s) {
			t.Errorf("%s: the selector does not match our own VM", name)
		}
	}
	other := pipeline.Identity{Node: "n2", Key: testKey}
	for name, s := range map[string]pool.Sandbox{
		"operator's bare claim_ref":    {ClaimRef: "ns/a"},
		"bare claim_ref, our labels":   {ClaimRef: "ns/a", Metadata: labels},
		"another node's VM":            {ClaimRef: other.ClaimRef("ns/a"), Metadata: other.Labels(ref)},
		"another node's, no labels":    {ClaimRef: other.ClaimRef("ns/a")},
		"our labels, other node's ref": {ClaimRef: other.ClaimRef("ns/a"), Metadata: labels},
		"our ref, other node's labels": {ClaimRef: id.ClaimRef("ns/a"), Metadata: other.Labels(ref)},
		"our ref, another provider":    {ClaimRef: id.ClaimRef("ns/a"), Metadata: map[string]string{pipeline.LabelManagedBy: "someone-else"}},
		"malformed key":                {ClaimRef: "vk-sandbox/" + testNode + "/a/" + markOf(id.ClaimRef("a")), Metadata: labels},
	} {
		if key, ok := id.Owns(s, true); ok {
			t.Errorf("%s: Owns = %q, true; want false", name, key)
		}
	}
	if _, ok := id.Labels(pipeline.PodRef{Key: "ns/b", UID: "u"})[pipeline.LabelOwnerUID]; ok {
		t.Error("a bare Pod's claim carries an owner-uid label")
	}
}

// markOf is the last segment of a claim_ref: its mark.
func markOf(ref string) string { return ref[strings.LastIndexByte(ref, '/')+1:] }

// Only the node key makes a valid mark. Any client may write any claim_ref
// and labels: a VM under this node's old unmarked form, a guessed or
// altered mark, another key's or another node's mark, with our labels
// forged on V3+, is never this node's; nor, on V4+ while the node holds the
// root token, is a tenant's row whatever its claim_ref. Marks are
// deterministic per node and key (the ?claim_ref= filter needs that), and
// differ per key, node and secret.
func TestAPlantedVMWithoutTheNodesMarkIsNeverOwned(t *testing.T) {
	id := testID
	ref := pipeline.PodRef{Key: "ns/a", UID: "uid-a", OwnerUID: "owner-a"}
	forged := id.Labels(ref) // labels anyone can write, V3+
	good := id.ClaimRef("ns/a")
	if good != (pipeline.Identity{Node: testNode, Key: append([]byte(nil), testKey...)}).ClaimRef("ns/a") {
		t.Fatal("the claim_ref is not deterministic per node and key")
	}
	mark := markOf(good)
	if len(mark) != 32 || !strings.HasPrefix(good, "vk-sandbox/"+testNode+"/ns/a/") {
		t.Fatalf("claim_ref %q: want vk-sandbox/<node>/<ns>/<name>/<32 hex digits>", good)
	}
	flip := func(s string, i int) string {
		b := []byte(s)
		b[i] ^= 1
		return string(b)
	}
	otherKey := pipeline.Identity{Node: testNode, Key: []byte("another-secret-0123456789abcdef!")}
	otherNode := pipeline.Identity{Node: "n2", Key: testKey}
	prefix := "vk-sandbox/" + testNode + "/"
	for name, ref := range map[string]string{
		"old unmarked form":          prefix + "ns/a",
		"empty mark":                 prefix + "ns/a/",
		"mark of another key":        otherKey.ClaimRef("ns/a"),
		"mark of another node":       prefix + "ns/a/" + markOf(otherNode.ClaimRef("ns/a")),
		"our mark for another Pod":   prefix + "ns/a/" + markOf(id.ClaimRef("ns/b")),
		"last digit wrong":           flip(good, len(good)-1),
		"first digit wrong":          flip(good, len(good)-len(mark)),
		"half the mark":              good[:len(good)-16],
		"the mark and more":          good + "00",
		"the mark in capitals":       prefix + "ns/a/" + strings.ToUpper(mark),
		"the mark, one segment more": prefix + "ns/a/x/" + mark,
	} {
		for _, s := range []pool.Sandbox{{ClaimRef: ref}, {ClaimRef: ref, Metadata: forged}} {
			if key, ok := id.Owns(s, true); ok {
				t.Errorf("%s (labels %v): Owns = %q, true; want false", name, s.Metadata != nil, key)
			}
			if !id.LooksLike(s, true) {
				t.Errorf("%s: not reported as a look-alike", name)
			}
		}
	}
	if (pipeline.Identity{Node: testNode}).ClaimRef("ns/a") == good {
		t.Fatal("a node without its key makes the same mark")
	}
	if _, ok := (pipeline.Identity{Node: testNode}).Owns(pool.Sandbox{ClaimRef: (pipeline.Identity{Node: testNode}).ClaimRef("ns/a")}, true); ok {
		t.Fatal("an identity without a key owns a VM")
	}

	// V4+: rows carry tenant. Our claims, made with the root token, carry
	// none; a tenant's row is not ours even with our exact claim_ref. With
	// a tenant token the listing holds only that tenant's rows, and while
	// the token's kind is unknown the mark alone decides.
	tenants := pool.Sandbox{ClaimRef: good, Metadata: forged, Tenant: "team-a"}
	if _, ok := id.Owns(tenants, true); ok {
		t.Error("a tenant's row is owned by a node holding the root token")
	}
	if key, ok := id.Owns(tenants, false); !ok || key != "ns/a" {
		t.Errorf("with a tenant token, our own row (of our tenant) is refused: %q, %v", key, ok)
	}
	if key, ok := id.Owns(pool.Sandbox{ClaimRef: good, Metadata: forged}, true); !ok || key != "ns/a" {
		t.Errorf("our own V4 row (no tenant) is refused: %q, %v", key, ok)
	}
	if id.LooksLike(pool.Sandbox{ClaimRef: "ns/a"}, true) || id.LooksLike(pool.Sandbox{ClaimRef: good}, true) {
		t.Error("a bare claim_ref or our own VM is reported as a look-alike")
	}
}
