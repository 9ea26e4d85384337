package pipeline

import (
	"strings"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// Identity marks the claims that this provider makes on this node, so that
// they can be told apart from every other client of the same sandboxd.
// sandbox-operator's aggregated apiserver claims on the same node with a
// bare "<namespace>/<name>" claim_ref; a provider using that form too could
// recover, adopt or release a VM it never made.
//
// Two marks, both fixed at claim time:
//   - claim_ref "vk-sandbox/<node>/<namespace>/<name>": unique to this
//     provider and node, and still naming the Pod key;
//   - metadata labels naming the provider, the node, the Pod UID and the
//     controller owner's UID.
//
// Every path that goes looking for VMs no row holds (the startup listing,
// lost-response recovery, deletes without a row, the orphan audit) takes
// only VMs that carry both (Owns). Rows in the state file are held by
// sandbox id, so rows made before these marks existed, and rows migrated
// from the reference's claims.json, keep working.
type Identity struct {
	Node string
}

// Metadata label keys and the provider's value. Keys are printable ASCII
// without '=' or '&', within sandboxd's bounds (pool.ValidateMetadata).
const (
	LabelManagedBy = "managed-by"
	LabelNode      = "vk-sandbox/node"
	LabelPodUID    = "vk-sandbox/pod-uid"
	LabelOwnerUID  = "vk-sandbox/owner-uid"
	ManagedBy      = "vk-sandbox"

	claimRefPrefix = "vk-sandbox/"
)

// ClaimRef is the claim_ref this node sends for a Pod key.
func (id Identity) ClaimRef(key string) string { return claimRefPrefix + id.Node + "/" + key }

// Labels are the metadata sent with a claim for ref.
func (id Identity) Labels(ref PodRef) map[string]string {
	m := map[string]string{LabelManagedBy: ManagedBy, LabelNode: id.Node, LabelPodUID: ref.UID}
	if ref.OwnerUID != "" {
		m[LabelOwnerUID] = ref.OwnerUID
	}
	return m
}

// Selector lists this node's VMs only; with claimRef set, one key's.
func (id Identity) Selector(key string) pool.ListOptions {
	o := pool.ListOptions{Metadata: map[string]string{LabelManagedBy: ManagedBy, LabelNode: id.Node}}
	if key != "" {
		o.ClaimRef = id.ClaimRef(key)
	}
	return o
}

// Owns reports whether this node made the listed VM, and for which Pod key.
// Both marks must be present: a VM with only one of them was not made by
// this code for this node.
func (id Identity) Owns(s pool.Sandbox) (key string, ok bool) {
	if s.Metadata[LabelManagedBy] != ManagedBy || s.Metadata[LabelNode] != id.Node {
		return "", false
	}
	key, ok = strings.CutPrefix(s.ClaimRef, claimRefPrefix+id.Node+"/")
	if !ok || strings.Count(key, "/") != 1 {
		return "", false
	}
	return key, true
}
