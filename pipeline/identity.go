package pipeline

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// Identity marks the claims that this provider makes on this node, so that
// they can be told apart from every other client of the same sandboxd.
// sandbox-operator's aggregated apiserver claims on the same node with a
// bare "<namespace>/<name>" claim_ref, and any client may write any
// claim_ref and any metadata: a claim_ref of this node's form proves
// nothing by itself.
//
// The proof is a mark that only this node can make: the claim_ref is
// "vk-sandbox/<node>/<namespace>/<name>/<pod-uid>/<mark>", where mark is
// HMAC-SHA256 of the node name, the Pod key and the Pod UID under the node
// key (a secret kept beside the state file, pool/store.NodeKey), truncated
// to 128 bits, in hex. It is deterministic per node and Pod generation, so
// a V2+ server's exact ?claim_ref= filter still finds one generation's
// VMs, and it is in the claim_ref because every version keeps and lists
// that, while metadata exists only since V3.
//
// The UID is in the mark because a claim_ref is not secret: a root-token
// reader of listings and every reader of the cluster-scoped NodeInventory
// see it. Pod names come back across generations (a Sandbox deleted and
// made again gets a Pod of the same name), so a mark over the key alone
// could be replayed: a VM planted under a seen claim_ref before the next
// generation's Pod arrives would be that Pod's lost answer. A replayed
// claim_ref names the generation it was made for, whose UID no later Pod
// has; each generation looks up only its own (selector), so a replay is
// never taken for a later one. A VM of this node's made for an earlier
// generation and never delivered is the orphan scan's to release
// (releaseUndelivered). The metadata labels (provider, node, Pod UID,
// controller owner UID) are sent with every claim and are an extra check
// where the server keeps them: a row whose labels name another provider or
// node is not ours, whatever its claim_ref; labels that agree prove
// nothing. On V4+, where rows carry tenant, a row of some tenant is not
// ours while this node holds the root token (its claims carry none).
//
// Every path that goes looking for VMs no row holds (the startup listing,
// lost-response recovery, deletes without a row, the orphan audit and its
// undelivered release) takes only VMs that pass Owns. Rows in the state
// file are held by sandbox id, so a row proves its VM whatever its
// claim_ref (rows made before the mark, rows migrated from the JSON
// claims document).
type Identity struct {
	Node string
	// Key is the node key. Shorter than minNodeKey, no VM is ever owned.
	Key []byte
}

// minNodeKey is the shortest node key Identity accepts, in bytes.
const minNodeKey = 16

// Metadata label keys and the provider's value. Keys are printable ASCII
// without '=' or '&', within sandboxd's bounds (pool.ValidateMetadata).
const (
	labelManagedBy = "managed-by"
	labelNode      = "vk-sandbox/node"
	labelPodUID    = "vk-sandbox/pod-uid"
	labelOwnerUID  = "vk-sandbox/owner-uid"
	managedBy      = "vk-sandbox"

	claimRefPrefix = "vk-sandbox/"
	markBytes      = 16 // the HMAC truncated to 128 bits
)

// mark is the node's mark for one Pod generation: hex of the first
// markBytes of HMAC-SHA256(Key, node NUL key NUL uid). NUL never occurs in
// a node name or in a UID (podUIDOK), so no other (node, key, uid) triple
// has the same input.
func (id Identity) mark(key PodKey, uid string) string {
	h := hmac.New(sha256.New, id.Key)
	h.Write([]byte(id.Node))
	h.Write([]byte{0})
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(uid))
	return hex.EncodeToString(h.Sum(nil)[:markBytes])
}

// ClaimRef is the claim_ref this node sends for the Pod generation (key,
// uid). A UID that is not one path segment (podUIDOK) is refused: it
// would make a claim_ref that Owns parses as another generation's.
func (id Identity) ClaimRef(key PodKey, uid string) (string, error) {
	if !podUIDOK(uid) {
		return "", fmt.Errorf("pod %s: UID %q cannot be a claim_ref segment (empty, too long, or not printable ASCII without '/')", key, uid)
	}
	return id.nodePrefix() + string(key) + "/" + uid + "/" + id.mark(key, uid), nil
}

func (id Identity) nodePrefix() string { return claimRefPrefix + id.Node + "/" }

// maxPodUID bounds a UID in a claim_ref. Kubernetes UIDs are RFC 4122
// strings (36 characters); the bound leaves room and no more.
const maxPodUID = 128

// podUIDOK reports whether uid is safe as one claim_ref path segment:
// non-empty, bounded, printable ASCII, and no '/' (so that the segment
// ends where Owns cuts it). Kubernetes UIDs always are.
func podUIDOK(uid string) bool {
	if uid == "" || len(uid) > maxPodUID {
		return false
	}
	for i := 0; i < len(uid); i++ {
		if c := uid[i]; c <= ' ' || c > '~' || c == '/' {
			return false
		}
	}
	return true
}

// Labels are the metadata sent with a claim for ref.
func (id Identity) Labels(ref PodRef) map[string]string {
	m := map[string]string{labelManagedBy: managedBy, labelNode: id.Node, labelPodUID: ref.UID}
	if ref.OwnerUID != "" {
		m[labelOwnerUID] = ref.OwnerUID
	}
	return m
}

// selector lists one Pod generation's VMs by its exact claim_ref: a VM
// made for another generation of the key (this node's or a replay of its
// claim_ref) is never in it. It carries no metadata filter: a server
// without metadata keeps none, and the client applies every filter to the
// answer too, which would then drop them all.
func (id Identity) selector(key PodKey, uid string) (pool.ListOptions, error) {
	ref, err := id.ClaimRef(key, uid)
	return pool.ListOptions{ClaimRef: ref}, err
}

// Owns reports whether this node made the listed VM, and for which Pod
// generation (key and UID): its claim_ref is this node's for a well-formed
// key and UID and carries this node's mark for both; its labels, when the
// server kept any, do not name another provider or node; and, when the
// node's token has proved to be the root token (root), it carries no
// tenant, as the root token's claims carry none. A tenant token lists only
// its own tenant's rows, so there the server has checked the tenant
// already; while the token's kind is not known, the mark alone decides.
// Callers that act for one generation compare the UID too: a mark proves
// which generation a VM was made for, never that it is another's.
func (id Identity) Owns(s pool.Sandbox, root bool) (key PodKey, uid string, ok bool) {
	if len(id.Key) < minNodeKey {
		return "", "", false // no key, no proof: a mark under it could be forged
	}
	rest, ok := strings.CutPrefix(s.ClaimRef, id.nodePrefix())
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", "", false
	}
	gen, mark := rest[:i], rest[i+1:]
	j := strings.LastIndexByte(gen, '/')
	if j < 0 || strings.Count(gen[:j], "/") != 1 || !podUIDOK(gen[j+1:]) {
		return "", "", false
	}
	key, uid = PodKey(gen[:j]), gen[j+1:]
	// Constant time: the compare must not tell a prober how much of a
	// guessed mark was right.
	if !hmac.Equal([]byte(mark), []byte(id.mark(key, uid))) {
		return "", "", false
	}
	if len(s.Metadata) > 0 && (s.Metadata[labelManagedBy] != managedBy || s.Metadata[labelNode] != id.Node) {
		return "", "", false
	}
	if root && s.Tenant != "" {
		return "", "", false // a tenant's claim: this node claims with the root token
	}
	return key, uid, true
}

// looksLike reports whether a VM's claim_ref has this node's form while
// Owns refuses it: another client's VM under a look-alike claim_ref (or
// one of this node's from before the mark, that no row holds). Such a VM is
// never adopted, recovered or released; it is logged and left to its lease.
func (id Identity) looksLike(s pool.Sandbox, root bool) bool {
	if !strings.HasPrefix(s.ClaimRef, id.nodePrefix()) {
		return false
	}
	_, _, ok := id.Owns(s, root)
	return !ok
}

// ownerGeneration is the controller owner UID a VM was made for, when the
// server kept the label; false on a server without metadata.
func ownerGeneration(s pool.Sandbox) (uid string, known bool) {
	if len(s.Metadata) == 0 {
		return "", false
	}
	return s.Metadata[labelOwnerUID], true
}

// owns is Identity.Owns with what this engine's token has proved to be.
func (e *Engine) owns(s pool.Sandbox) (PodKey, string, bool) { return e.id.Owns(s, e.rootToken()) }

// rootToken reports whether the node token has proved to be the root
// token: feature detection found it so, and no root-only call has been
// refused since. Unknown (detection off or not done) is not root.
func (e *Engine) rootToken() bool {
	f, ok := e.sbx.Features()
	return ok && f.Token == pool.TokenRoot && !e.sbx.Tenant()
}

// foreign reports whether s is another client's VM under a claim_ref of
// this node's form (Identity.looksLike) that no row holds. A VM a row holds
// is this node's by its id, whatever its claim_ref.
func (e *Engine) foreign(s pool.Sandbox, held bool) bool {
	return !held && e.id.looksLike(s, e.rootToken())
}
