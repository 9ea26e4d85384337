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
		"labels kept (V3+)":       {ClaimRef: mustRef(id, "ns/a", "uid-a"), Metadata: labels},
		"labels dropped (V1, V2)": {ClaimRef: mustRef(id, "ns/a", "uid-a")},
	} {
		if key, uid, ok := id.Owns(s, true); !ok || key != "ns/a" || uid != "uid-a" {
			t.Errorf("%s: Owns = %q, %q, %v; want ns/a, uid-a", name, key, uid, ok)
		}
		sel, err := id.Selector("ns/a", "uid-a")
		if err != nil || !sel.Matches(s) {
			t.Errorf("%s: the selector does not match our own VM (%v)", name, err)
		}
	}
	other := pipeline.Identity{Node: "n2", Key: testKey}
	for name, s := range map[string]pool.Sandbox{
		"operator's bare claim_ref":    {ClaimRef: "ns/a"},
		"bare claim_ref, our labels":   {ClaimRef: "ns/a", Metadata: labels},
		"another node's VM":            {ClaimRef: mustRef(other, "ns/a", "uid-a"), Metadata: other.Labels(ref)},
		"another node's, no labels":    {ClaimRef: mustRef(other, "ns/a", "uid-a")},
		"our labels, other node's ref": {ClaimRef: mustRef(other, "ns/a", "uid-a"), Metadata: labels},
		"our ref, other node's labels": {ClaimRef: mustRef(id, "ns/a", "uid-a"), Metadata: other.Labels(ref)},
		"our ref, another provider":    {ClaimRef: mustRef(id, "ns/a", "uid-a"), Metadata: map[string]string{pipeline.LabelManagedBy: "someone-else"}},
		"malformed key":                {ClaimRef: mustRef(id, "a", "uid-a"), Metadata: labels},
	} {
		if key, uid, ok := id.Owns(s, true); ok {
			t.Errorf("%s: Owns = %q, %q, true; want false", name, key, uid)
		}
	}
	if _, ok := id.Labels(pipeline.PodRef{Key: "ns/b", UID: "u"})[pipeline.LabelOwnerUID]; ok {
		t.Error("a bare Pod's claim carries an owner-uid label")
	}
}

// markOf is the last segment of a claim_ref: its mark.
func markOf(ref string) string { return ref[strings.LastIndexByte(ref, '/')+1:] }

// mustRef is id's claim_ref for the Pod generation (key, uid), a UID the
// test knows is well formed.
func mustRef(id pipeline.Identity, key pipeline.PodKey, uid string) string {
	ref, err := id.ClaimRef(key, uid)
	if err != nil {
		panic(err)
	}
	return ref
}

// Only the node key makes a valid mark. Any client may write any claim_ref
// and labels: a VM under this node's old unmarked form, a guessed or
// altered mark, another key's or another node's mark, with our labels
// forged on V3+, is never this node's; nor, on V4+ while the node holds the
// root token, is a tenant's row whatever its claim_ref. Marks are
// deterministic per node and Pod generation (the ?claim_ref= filter needs
// that), and differ per key, UID, node and secret.
func TestAPlantedVMWithoutTheNodesMarkIsNeverOwned(t *testing.T) {
	id := testID
	ref := pipeline.PodRef{Key: "ns/a", UID: "uid-a", OwnerUID: "owner-a"}
	forged := id.Labels(ref) // labels anyone can write, V3+
	good := mustRef(id, "ns/a", "uid-a")
	if good != mustRef(pipeline.Identity{Node: testNode, Key: append([]byte(nil), testKey...)}, "ns/a", "uid-a") {
		t.Fatal("the claim_ref is not deterministic per node and Pod generation")
	}
	mark := markOf(good)
	if len(mark) != 32 || !strings.HasPrefix(good, "vk-sandbox/"+testNode+"/ns/a/uid-a/") {
		t.Fatalf("claim_ref %q: want vk-sandbox/<node>/<ns>/<name>/<pod-uid>/<32 hex digits>", good)
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
		"old unmarked form":               prefix + "ns/a",
		"key-only form, no UID":           prefix + "ns/a/" + mark,
		"empty mark":                      prefix + "ns/a/uid-a/",
		"empty UID":                       prefix + "ns/a//" + mark,
		"mark of another key":             mustRef(otherKey, "ns/a", "uid-a"),
		"mark of another node":            prefix + "ns/a/uid-a/" + markOf(mustRef(otherNode, "ns/a", "uid-a")),
		"our mark for another Pod":        prefix + "ns/a/uid-a/" + markOf(mustRef(id, "ns/b", "uid-a")),
		"our mark for another generation": prefix + "ns/a/uid-a/" + markOf(mustRef(id, "ns/a", "uid-b")),
		"last digit wrong":                flip(good, len(good)-1),
		"first digit wrong":               flip(good, len(good)-len(mark)),
		"half the mark":                   good[:len(good)-16],
		"the mark and more":               good + "00",
		"the mark in capitals":            prefix + "ns/a/uid-a/" + strings.ToUpper(mark),
		"the mark, one segment more":      prefix + "ns/a/x/uid-a/" + mark,
	} {
		for _, s := range []pool.Sandbox{{ClaimRef: ref}, {ClaimRef: ref, Metadata: forged}} {
			if key, uid, ok := id.Owns(s, true); ok {
				t.Errorf("%s (labels %v): Owns = %q, %q, true; want false", name, s.Metadata != nil, key, uid)
			}
			if !id.LooksLike(s, true) {
				t.Errorf("%s: not reported as a look-alike", name)
			}
		}
	}
	if mustRef(pipeline.Identity{Node: testNode}, "ns/a", "uid-a") == good {
		t.Fatal("a node without its key makes the same mark")
	}
	if _, _, ok := (pipeline.Identity{Node: testNode}).Owns(pool.Sandbox{ClaimRef: mustRef(pipeline.Identity{Node: testNode}, "ns/a", "uid-a")}, true); ok {
		t.Fatal("an identity without a key owns a VM")
	}

	// V4+: rows carry tenant. Our claims, made with the root token, carry
	// none; a tenant's row is not ours even with our exact claim_ref. With
	// a tenant token the listing holds only that tenant's rows, and while
	// the token's kind is unknown the mark alone decides.
	tenants := pool.Sandbox{ClaimRef: good, Metadata: forged, Tenant: "team-a"}
	if _, _, ok := id.Owns(tenants, true); ok {
		t.Error("a tenant's row is owned by a node holding the root token")
	}
	if key, uid, ok := id.Owns(tenants, false); !ok || key != "ns/a" || uid != "uid-a" {
		t.Errorf("with a tenant token, our own row (of our tenant) is refused: %q, %q, %v", key, uid, ok)
	}
	if key, uid, ok := id.Owns(pool.Sandbox{ClaimRef: good, Metadata: forged}, true); !ok || key != "ns/a" || uid != "uid-a" {
		t.Errorf("our own V4 row (no tenant) is refused: %q, %q, %v", key, uid, ok)
	}
	if id.LooksLike(pool.Sandbox{ClaimRef: "ns/a"}, true) || id.LooksLike(pool.Sandbox{ClaimRef: good}, true) {
		t.Error("a bare claim_ref or our own VM is reported as a look-alike")
	}
}

// A claim_ref is not secret (listings, the NodeInventory), and Pod names
// come back across generations. The mark binds the Pod UID, so a previous
// generation's exact claim_ref is owned as that generation's, never as the
// next one's: Owns names the UID it was made for, the next generation's
// selector does not match it, and a UID written into a replay without the
// mark made for it is refused.
func TestAnotherGenerationsMarkIsNeverThisGenerations(t *testing.T) {
	id := testID
	prev := mustRef(id, "ns/x", "uid-gen-1")
	next := mustRef(id, "ns/x", "uid-gen-2")
	if prev == next || markOf(prev) == markOf(next) {
		t.Fatalf("two generations of ns/x share a mark: %q, %q", prev, next)
	}
	key, uid, ok := id.Owns(pool.Sandbox{ClaimRef: prev}, true)
	if !ok || key != "ns/x" || uid != "uid-gen-1" {
		t.Fatalf("Owns(previous generation's claim_ref) = %q, %q, %v; want ns/x, uid-gen-1", key, uid, ok)
	}
	sel, err := id.Selector("ns/x", "uid-gen-2")
	if err != nil {
		t.Fatal(err)
	}
	if sel.Matches(pool.Sandbox{ClaimRef: prev}) {
		t.Error("the next generation's selector matches the previous generation's claim_ref")
	}
	// The previous mark under the next UID: a replay rewritten to fit.
	swapped := strings.TrimSuffix(next, markOf(next)) + markOf(prev)
	if _, _, ok := id.Owns(pool.Sandbox{ClaimRef: swapped}, true); ok {
		t.Error("the previous generation's mark is accepted for the next generation's UID")
	}
}

// A Pod UID is one path segment of the claim_ref: one that is empty, or
// carries a '/', a NUL or a space, or is unbounded, is refused when the
// claim_ref is built and never parsed out of a listed one.
func TestAPodUIDThatIsNotOneSegmentIsRefused(t *testing.T) {
	id := testID
	if _, err := id.ClaimRef("ns/a", "0f6c8a52-3d5e-4b8e-9c1a-7a2b3c4d5e6f"); err != nil {
		t.Fatalf("an RFC 4122 UID is refused: %v", err)
	}
	for _, uid := range []string{"", "a/b", "/", "a\x00b", "a b", strings.Repeat("u", 129)} {
		if ref, err := id.ClaimRef("ns/a", uid); err == nil {
			t.Errorf("UID %q: ClaimRef = %q, want an error", uid, ref)
		} else if !strings.Contains(err.Error(), "ns/a") {
			t.Errorf("UID %q: error %q does not name the Pod key", uid, err)
		}
		if _, err := id.Selector("ns/a", uid); err == nil {
			t.Errorf("UID %q: Selector built", uid)
		}
	}
	// A listed claim_ref with a segment more between the key and the mark
	// is refused, whichever generation's mark it carries.
	h := "vk-sandbox/" + testNode + "/ns/a/u/v/"
	for _, s := range []string{h + markOf(mustRef(id, "ns/a/u", "v")), h + markOf(mustRef(id, "ns/a", "u"))} {
		if key, uid, ok := id.Owns(pool.Sandbox{ClaimRef: s}, true); ok {
			t.Errorf("Owns(%q) = %q, %q, true; want false", s, key, uid)
		}
	}
}
