package pipeline

import (
	"context"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// PodRef names one generation of a sandbox Pod.
type PodRef struct {
	Key      PodKey // the claim_ref is built from it (Identity.ClaimRef)
	UID      string
	OwnerUID string // controller ownerReference UID; empty for a bare Pod
	Owner    string // controller owner as apiVersion/kind/name; recorded with the claim
}

func (r PodRef) String() string { return string(r.Key) }

// PodKey names a sandbox Pod across its generations (UIDs):
// "namespace/name". It is the key of a claim, of the state file's rows and
// of kube's Pod cache. JoinKey builds one and Split parses it; no other code
// does (Identity.Owns only checks that a listed key has one "/").
type PodKey string

// JoinKey is the key of Pod namespace/name.
func JoinKey(namespace, name string) PodKey { return PodKey(namespace + "/" + name) }

// Split reports ok false for a key without a "/".
func (k PodKey) Split() (namespace, name string, ok bool) { return strings.Cut(string(k), "/") }

// ClaimSpec is what a claim asks sandboxd for (parsed annotations).
type ClaimSpec struct {
	Template string
	Net      string
	Size     string
	// TTLSeconds is the lifetime the Pod asks for; 0 means the sandboxd
	// default, TTLWhilePodLives no end. The node may grant less per claim
	// (it caps a lease at 24 h): the lease watch then renews until this
	// lifetime is reached, or for ever.
	TTLSeconds int64
}

// TTLWhilePodLives is the lifetime of a Pod that names none: its VM is
// renewed ahead of each grant for as long as its claim is held, and ends
// only with a release (its owner's delete). maxGrantSeconds is asked for
// each time; the node grants at most its cap (24 h).
const (
	TTLWhilePodLives int64 = -1
	maxGrantSeconds  int64 = 24 * 60 * 60
)

// Intent is the newest desired state for one Pod UID.
type Intent struct {
	Ref  PodRef
	Spec ClaimSpec
}

// State is where a claim row stands.
type State int

const (
	stateNone State = iota
	StateTentative
	StateQuarantined
	StateDurable
)

func (s State) String() string {
	switch s {
	case StateTentative:
		return "tentative"
	case StateQuarantined:
		return "quarantined"
	case StateDurable:
		return "durable"
	}
	return "none"
}

// ClaimView is what the other layers see of a claim row: everything but
// its sandbox token. The token is the release credential; it stays in the
// engine and the store, and leaves them only towards sandboxd (see
// Engine.Credential), so status, Events, the inventory and stats are
// rendered from a value that cannot leak it.
type ClaimView struct {
	ID        string
	Address   string // sandboxd's owner_addr
	PodUID    string
	OwnerUID  string
	Owner     string // "apiVersion/kind/name", or store.OwnerUnknown
	ClaimedAt time.Time
	Deadline  time.Time
	State     State
}

// OwnerKnown: the row records its owner (or that there is none), as rows
// migrated from the JSON claims document do not.
func (v ClaimView) OwnerKnown() bool { return v.Owner != store.OwnerUnknown }

func viewOf(c store.Claim, st State) ClaimView {
	return ClaimView{ID: c.ID, Address: c.Address, PodUID: c.PodUID, OwnerUID: c.OwnerUID, Owner: c.Owner,
		ClaimedAt: c.ClaimedAt, Deadline: c.Deadline, State: st}
}

// Reporter receives the outcomes that become Pod status. The kube package
// implements it. Each method must re-check that ref still names the Pod it
// would publish to (the key may belong to a newer generation by now), and
// must not block for long: it is called on a pipeline worker.
type Reporter interface {
	// Running: the claim is durable and bound to ref.UID.
	Running(ctx context.Context, ref PodRef, c ClaimView, adopted bool)
	// Pending: no usable claim yet; reason is a CamelCase Kubernetes reason.
	Pending(ctx context.Context, ref PodRef, reason, message string)
	// Expired: the lease ended and sandboxd confirmed the sandbox is gone.
	Expired(ctx context.Context, ref PodRef, c ClaimView)
	// Renewed: the lease of ref's claim was renewed; c carries the granted
	// deadline, already durable.
	Renewed(ctx context.Context, ref PodRef, c ClaimView)
	// Warning: something needs an operator's eye but changes no state (a
	// renew or a release that keeps failing). reason is CamelCase.
	Warning(ctx context.Context, ref PodRef, reason, message string)
}

// Sandboxd is the subset of *pool.Client the pipeline uses.
type Sandboxd interface {
	Claim(ctx context.Context, r pool.ClaimRequest) (pool.ClaimResponse, error)
	Release(ctx context.Context, id, token string) error
	Renew(ctx context.Context, id, token string, ttlSeconds int64) (pool.RenewResponse, error)
	List(ctx context.Context, o pool.ListOptions) ([]pool.Sandbox, error)
	Get(ctx context.Context, id string) (pool.Sandbox, error)
	// Tenant reports that the token proved to be a tenant token: root-only
	// calls (Get) are then not made at all, rather than met with 403.
	Tenant() bool
	// Features is what the node was found to support (pool.Client.Detect);
	// false while unknown, when the engine assumes the oldest server.
	Features() (pool.Features, bool)
}

// Store is the subset of *store.Store the pipeline uses.
type Store interface {
	Put(ctx context.Context, key string, c store.Claim) error
	Delete(ctx context.Context, key string) error
	Get(key string) (store.Claim, bool)
	// Holder returns the key whose durable row holds claim id.
	Holder(id string) (key string, ok bool)
	Range(fn func(key string, c store.Claim) bool)
	Len() int
	// TakeChanged lists the keys put since its last call (all: look at
	// every row instead), for the lease watch.
	TakeChanged(dst []string) (_ []string, all bool)
}

// Verdict is the delete authorization decision (docs/pod-contract.md,
// "Delete authorization").
type Verdict struct {
	Release bool   // false: preserve
	Reason  string // e.g. "bare-pod", "owner-gone", "owner-alive", "owner-get-error"
	// FromOwner: the verdict was read from an owner object. A release that
	// is not (a bare Pod's) carries no authority over a row whose owner is
	// unknown (store.OwnerUnknown).
	FromOwner bool
}

// ReasonOwnerUnknown preserves a row whose controller owner is unknown
// when no owner lookup gave a release verdict.
const ReasonOwnerUnknown = "owner-unknown"

// OwnerAuthority asks a claim's recorded controller owner (c.Owner and
// c.OwnerUID, never a Pod's ownerReference) for the verdict of the delete
// table: release when it is gone, being deleted or replaced; preserve when
// it lives or cannot be asked. key is the Pod key (its namespace is the
// owner's). The kube package implements it with a fresh GET.
type OwnerAuthority func(ctx context.Context, key PodKey, c ClaimView) Verdict

// Observer receives pipeline metrics. telemetry.Metrics satisfies it.
type Observer interface {
	ClaimLatency(ctx context.Context, outcome string, d time.Duration)
	Decision(ctx context.Context, kind, reason string)
	// LoopPass is called at the end of every pass of a background loop
	// (LoopLeaseWatch, LoopReauthorize, LoopOrphanScan, LoopVerify), with
	// how long the pass took: a loop that reports no pass is not running.
	LoopPass(loop string, took time.Duration)
}

// The background loops, as Observer.LoopPass names them.
const (
	LoopLeaseWatch  = "lease-watch"
	LoopReauthorize = "reauthorize"
	LoopOrphanScan  = "orphan-scan"
	LoopVerify      = "verify" // one pass per startup listing tried
)

type nopObserver struct{}

func (nopObserver) ClaimLatency(context.Context, string, time.Duration) {}
func (nopObserver) Decision(context.Context, string, string)            {}
func (nopObserver) LoopPass(string, time.Duration)                      {}
