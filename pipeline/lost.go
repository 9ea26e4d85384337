package pipeline

import (
	"context"
	"errors"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// recoverLost finds a VM that a lost claim response left behind. Only VMs
// this node made for this Pod generation count (Identity.Owns, and the
// lookup is by the generation's own claim_ref): a VM made for an earlier
// generation of the key, or planted under a replay of its claim_ref, is
// never taken for this one (an undelivered one of this node's is the
// orphan scan's, releaseUndelivered). This key holds no local row
// (reconcile only claims afresh when it has none), so every such VM is one
// that no local claim holds and no user was ever given.
//
// One that fits the intent (the same template, net and size, made for the
// same controller owner generation where the server keeps it) is
// recovered; every other one (a duplicate, or a VM made for an owner
// generation that is gone) is released, so that the key ends with exactly
// one VM. The credential comes from a root read of the id. A server before
// V2 answers that read without the token: the VM is then released by id
// with the root token (which every version from V1 accepts) and the key
// claims afresh, still one VM. Without the root token no credential can be
// fetched and nothing released: a fitting VM makes the claim
// errUnrecoverable (never claimed over; it is left to its lease), and the
// others are left to their lease.
func (e *Engine) recoverLost(ctx context.Context, it Intent) (pool.ClaimResponse, bool, error) {
	ref := it.Ref
	sel, err := e.id.selector(ref.Key, ref.UID)
	if err != nil {
		return pool.ClaimResponse{}, false, err
	}
	rows, err := e.lookups.byClaimRef(ctx, sel)
	if err != nil {
		return pool.ClaimResponse{}, false, err
	}
	var got pool.ClaimResponse
	var found, unrecoverable bool
	for _, row := range rows {
		if key, uid, ok := e.owns(row); !ok || key != ref.Key || uid != ref.UID {
			continue
		}
		fit := fits(row, it)
		var full pool.Sandbox
		if !e.sbx.Tenant() {
			full, err = e.sbx.Get(ctx, row.ID)
			if err != nil && !errors.Is(err, pool.ErrForbidden) {
				return pool.ClaimResponse{}, false, err
			}
		}
		if full.Token == "" && !e.sbx.Tenant() && full.ID != "" {
			// A root read without the token (sandboxd before V2): no
			// credential to hand over, but root may release by id.
			if err := e.releaseVM(ctx, ref.Key, full.ID, ""); err != nil {
				return pool.ClaimResponse{}, false, err
			}
			e.obs.Decision(ctx, decisionRelease, "lost-response-no-token-read")
			e.log.InfoContext(ctx, "released a VM whose claim answer was lost: this sandboxd cannot hand its token back, so the Pod claims afresh",
				"pod", ref.Key, "claim", row.ID)
			continue
		}
		if full.Token == "" {
			if fit {
				unrecoverable = true
			}
			e.log.WarnContext(ctx, "a VM this node made and never delivered cannot be released without the root token; it is left to its lease",
				"pod", ref.Key, "claim", row.ID, "fits", fit)
			continue
		}
		if fit && !found {
			e.log.InfoContext(ctx, "recovered a claim whose response was lost", "pod", ref.Key, "claim", row.ID)
			got = pool.ClaimResponse{ID: full.ID, Token: full.Token, Deadline: full.Deadline, OwnerAddr: e.lastOwnerAddr()}
			found = true
			continue
		}
		if err := e.releaseVM(ctx, ref.Key, full.ID, full.Token); err != nil {
			return pool.ClaimResponse{}, false, err
		}
		reason := "lost-response-duplicate"
		if !fit {
			reason = "lost-response-other-shape"
		}
		e.obs.Decision(ctx, decisionRelease, reason)
	}
	if !found && unrecoverable {
		return pool.ClaimResponse{}, false, errUnrecoverable
	}
	return got, found, nil
}

// fits reports whether a VM made for the key can serve intent it: the same
// pool (an axis the Pod left empty takes whatever the node defaulted it to)
// and, where the server kept the labels, the same controller owner
// generation. A server without metadata keeps no owner mark; the VM's
// claim_ref still names the Pod generation it was made for, and only that
// generation's lookup finds it (Identity.selector), so no other owner's
// Pod takes it.
func fits(row pool.Sandbox, it Intent) bool {
	axis := func(want, got string) bool { return want == "" || want == got }
	owner, known := ownerGeneration(row)
	return row.Key.Template == it.Spec.Template && axis(it.Spec.Net, row.Key.Net) && axis(it.Spec.Size, row.Key.Size) &&
		(!known || owner == it.Ref.OwnerUID)
}

// NoteOwnerAddr remembers the node's owner_addr: from every claim answer,
// and from the advertise_addr that /v1/info reports (the same value). It is
// node-wide, the same for every claim, so a VM recovered from a lost
// response (whose index row never carries it) gets the address the node
// gives every other claim.
func (e *Engine) NoteOwnerAddr(addr string) {
	if addr != "" && e.lastOwnerAddr() != addr {
		e.ownerAddr.Store(&addr)
	}
}

func (e *Engine) lastOwnerAddr() string {
	if p := e.ownerAddr.Load(); p != nil {
		return *p
	}
	return ""
}
