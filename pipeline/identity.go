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
// The claim_ref is the proof, on every sandboxd version: every version
// keeps and lists it, while claim metadata exists only since V3 and older
// servers drop it without a word. "vk-sandbox/<node>/<namespace>/<name>"
// names this provider, this node and the Pod key. The metadata labels
// (provider, node, Pod UID, controller owner UID) are sent with every claim
// and are an extra check where the server keeps them: a row whose labels
// name another provider or node is not ours, whatever its claim_ref.
//
// Every path that goes looking for VMs no row holds (the startup listing,
// lost-response recovery, deletes without a row, the orphan audit) takes
// only VMs that pass Owns. Rows in the state file are held by sandbox id,
// so rows migrated from the JSON claims document keep working.
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
func (id Identity) ClaimRef(key PodKey) string { return claimRefPrefix + id.Node + "/" + string(key) }

// Labels are the metadata sent with a claim for ref.
func (id Identity) Labels(ref PodRef) map[string]string {
	m := map[string]string{LabelManagedBy: ManagedBy, LabelNode: id.Node, LabelPodUID: ref.UID}
	if ref.OwnerUID != "" {
		m[LabelOwnerUID] = ref.OwnerUID
	}
	return m
}

// Selector lists one key's VMs by its exact claim_ref. It carries no
// metadata filter: a server without metadata keeps none, and the client
// applies every filter to the answer too, which would then drop them all.
func (id Identity) Selector(key PodKey) pool.ListOptions {
	return pool.ListOptions{ClaimRef: id.ClaimRef(key)}
}

// Owns reports whether this node made the listed VM, and for which Pod key:
// its claim_ref is this node's, for a well-formed key, and its labels, when
// the server kept any, do not name another provider or node.
func (id Identity) Owns(s pool.Sandbox) (key PodKey, ok bool) {
	k, ok := strings.CutPrefix(s.ClaimRef, claimRefPrefix+id.Node+"/")
	if !ok || strings.Count(k, "/") != 1 {
		return "", false
	}
	key = PodKey(k)
	if len(s.Metadata) > 0 && (s.Metadata[LabelManagedBy] != ManagedBy || s.Metadata[LabelNode] != id.Node) {
		return "", false
	}
	return key, true
}

// ownerGeneration is the controller owner UID a VM was made for, when the
// server kept the label; false on a server without metadata.
func ownerGeneration(s pool.Sandbox) (uid string, known bool) {
	if len(s.Metadata) == 0 {
		return "", false
	}
	return s.Metadata[LabelOwnerUID], true
}
