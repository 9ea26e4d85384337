package pipeline

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// DeleteResult says what a delete did.
type DeleteResult struct {
	// Held: this Pod generation held the key's claim, so a verdict was taken.
	// False for a stale UID (an older generation) or a Pod without a claim.
	Held    bool
	Verdict Verdict
	Shared  bool // answered by a concurrent duplicate delete (singleflight)
}

// Delete ends the intent of ref and, when ref's generation holds the key's
// claim, takes the verdict: preserve keeps the claim for a same-name
// replacement to adopt; release calls sandboxd. A release error keeps the
// claim (and the caller should keep the Pod), so the delete can be retried
// with the credential intact. A 404 from sandboxd is converged.
//
// The verdict comes from the owner recorded with the claim (Owners), never
// from the deleted Pod: a Pod's ownerReferences can be edited by whoever
// may patch Pods, so they are a claim to authority, not proof. podVerdict,
// the verdict of the Pod's own controller owner, is asked only where no
// owner is recorded: a row migrated from the JSON claims document, and VMs
// that no row holds (which no user was ever given).
//
// Concurrent deletes of one UID share one decision (virtual-kubelet may call
// DeletePod several times for the same Pod).
func (e *Engine) Delete(ctx context.Context, ref PodRef, podVerdict func(context.Context) Verdict) (DeleteResult, error) {
	v, err, shared := e.sf.Do("delete/"+ref.UID, func() (any, error) {
		return e.delete(ctx, ref, podVerdict)
	})
	res := v.(DeleteResult)
	res.Shared = shared
	return res, err
}

func (e *Engine) delete(ctx context.Context, ref PodRef, podVerdict func(context.Context) Verdict) (DeleteResult, error) {
	ctx, span := e.tracer.Start(ctx, "claim.delete", trace.WithAttributes(refAttrs(ref)...))
	defer span.End()
	// A deleted generation is never claimed for again: its queued intent
	// goes, and its tombstone stops a transaction that already took it.
	e.keys.died(ref.Key, ref.UID)
	e.cancelIntent(ref.UID)
	// The owner GET can take --owner-get-timeout. It runs before the key
	// lock is taken, so the key's other work (a replacement Pod's
	// transaction, the lease watch) does not wait behind it. The verdict
	// is about the owner, not the row, so it still holds under the lock,
	// but only for the claim that was asked about. The row is looked up
	// again under the lock, and the owner is asked again if the row
	// changed (a replacement adopted it or released it meanwhile).
	var v Verdict
	askedFor, asked := "", false // the claim ID the verdict was taken for
	if c, st := e.keys.lookup(ref.Key); st != stateNone && c.PodUID == ref.UID {
		v, askedFor, asked = e.authorizeSpan(ctx, e.verdictFor(ref.Key, c, podVerdict)), c.ID, true
	}
	defer e.keys.lock(ref.Key)()
	c, st := e.keys.lookup(ref.Key)
	if st == stateNone && e.maybeUnheld(ref.Key) {
		return e.deleteUnheld(ctx, ref, podVerdict)
	}
	// Stale-UID guard: the claim belongs to another generation of this key
	// (or there is none); this delete carries no authority over it.
	if st == stateNone || c.PodUID != ref.UID {
		span.SetAttributes(attribute.Bool("vksandbox.delete.held", false))
		return DeleteResult{}, nil
	}
	if !asked || askedFor != c.ID {
		v = e.authorizeSpan(ctx, e.verdictFor(ref.Key, c, podVerdict))
	}
	if v.Release && !v.FromOwner && !c.OwnerKnown() {
		// A bare Pod's delete is no authority over a row whose owner is
		// unknown (migrated from the JSON claims document): that Pod may
		// have had one.
		v = Verdict{Reason: ReasonOwnerUnknown}
	}
	span.SetAttributes(attribute.String("vksandbox.claim.id", c.ID), attribute.Bool("vksandbox.verdict.release", v.Release),
		attribute.String("vksandbox.verdict.reason", v.Reason))
	res := DeleteResult{Held: true, Verdict: v}
	if !v.Release {
		e.obs.Decision(ctx, decisionPreserve, v.Reason)
		e.log.InfoContext(ctx, "pod deleted without owner authority: VM preserved for adoption",
			"pod", ref.Key, "claim", c.ID, "reason", v.Reason)
		// Held for a Pod that is gone: if no replacement adopts it, its
		// recorded owner is asked again later (see reauthorize).
		e.keys.detach(ref.Key, c.ID)
		return res, nil
	}
	if err := e.release(ctx, ref.Key, c, st, v.Reason); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		// virtual-kubelet may not ask again (it deletes a dangling Pod
		// once): the engine retries the release itself.
		e.keys.detach(ref.Key, c.ID)
		return res, err
	}
	return res, nil
}

// verdictFor is where a held row's delete verdict comes from: the owner
// recorded with the claim, compared in full (Owners); the deleted Pod's own
// owner only for a row that records none (migrated from the JSON claims
// document), and then only a verdict read from an owner object releases it
// (see delete).
func (e *Engine) verdictFor(key PodKey, c store.Claim, podVerdict func(context.Context) Verdict) func(context.Context) Verdict {
	if !c.OwnerKnown() {
		return podVerdict
	}
	return func(ctx context.Context) Verdict { return e.owners(ctx, key, viewOf(c, StateDurable)) }
}

// authorizeSpan takes the owner's verdict inside a delete.authorize span.
func (e *Engine) authorizeSpan(ctx context.Context, authorize func(context.Context) Verdict) Verdict {
	ctx, span := e.tracer.Start(ctx, "delete.authorize")
	defer span.End()
	v := authorize(ctx)
	span.SetAttributes(attribute.Bool("vksandbox.verdict.release", v.Release), attribute.String("vksandbox.verdict.reason", v.Reason))
	return v
}

// release frees the VM at sandboxd with the row's own token, then forgets
// the row. The caller holds the key lock and has the authority. The row is
// forgotten only once sandboxd confirms the VM is gone (see releaseVM).
func (e *Engine) release(ctx context.Context, key PodKey, c store.Claim, st State, reason string) error {
	if err := e.releaseVM(ctx, key, c.ID, c.Token); err != nil {
		e.obs.Decision(ctx, decisionReleaseFailed, reason)
		return keyErr(key, "release of "+c.ID, err)
	}
	switch st {
	case stateNone: // an unheld VM: there is no row to forget
	case StateTentative:
		e.keys.clearTentative(key)
	default:
		// The VM is gone. If this tombstone fails to land, the row comes back
		// quarantined after a restart and the listing drops it.
		if err := e.store.Delete(context.WithoutCancel(ctx), string(key)); err != nil {
			return keyErr(key, "forget released claim "+c.ID, err)
		}
		e.forgetRow(key)
	}
	e.obs.Decision(ctx, decisionRelease, reason)
	e.log.InfoContext(ctx, "released VM", "pod", key, "claim", c.ID, "reason", reason)
	return nil
}

// deleteUnheld handles a delete for a key with no row while sandboxd may
// hold VMs under the deleted generation's claim_ref that no row holds
// (claims in flight when the last process stopped). Only VMs that this
// node made for that generation count (Identity.Owns, and the lookup is by
// its own claim_ref); another client's VM, and a VM made for another
// generation of the key, are never touched here. Those VMs were never
// reported Running, so no user has one; still, they are released only on
// a release verdict from this Pod's owner. On preserve they are left: no
// later generation recovers them (its claim_ref names its own UID), and
// the orphan scan releases them once they are older than the settle
// window (releaseUndelivered). Without the root token their credentials
// cannot be fetched: they are logged and left to their lease.
func (e *Engine) deleteUnheld(ctx context.Context, ref PodRef, podVerdict func(context.Context) Verdict) (DeleteResult, error) {
	sel, err := e.id.selector(ref.Key, ref.UID)
	if err != nil {
		return DeleteResult{}, err
	}
	rows, err := e.lookups.byClaimRef(ctx, sel)
	if err != nil {
		return DeleteResult{}, keyErr(ref.Key, "look up unheld sandboxes by claim_ref", err)
	}
	var ids []string
	for _, r := range rows {
		if key, uid, ok := e.owns(r); ok && key == ref.Key && uid == ref.UID {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		e.settleUnlessLive(ref.Key)
		return DeleteResult{}, nil
	}
	v := podVerdict(ctx)
	res := DeleteResult{Held: true, Verdict: v}
	if !v.Release {
		e.obs.Decision(ctx, decisionPreserve, v.Reason)
		e.log.InfoContext(ctx, "pod deleted without owner authority: unheld VMs kept for the next claim to recover",
			"pod", ref.Key, "sandboxes", len(ids), "reason", v.Reason)
		return res, nil
	}
	for _, id := range ids {
		var full pool.Sandbox
		if !e.sbx.Tenant() {
			if full, err = e.sbx.Get(ctx, id); err != nil && !errors.Is(err, pool.ErrForbidden) {
				return res, keyErr(ref.Key, "fetch credential of unheld sandbox "+id, err)
			}
		}
		// A root read that answered is the root token's, which releases
		// by id (an empty token) where the read carries none (before V2).
		if full.ID == "" {
			e.log.WarnContext(ctx, "unheld sandbox cannot be released without the root token; it is left to its lease",
				"pod", ref.Key, "claim", id)
			return res, nil
		}
		if err := e.release(ctx, ref.Key, store.Claim{ID: id, Token: full.Token}, stateNone, v.Reason+"/unheld"); err != nil {
			return res, err
		}
	}
	e.settleUnlessLive(ref.Key)
	return res, nil
}

// settleUnlessLive ends key's unsettled mark after a delete looked up the
// deleted generation's VMs, unless another generation of the key is live:
// that lookup did not cover the live one's claim_ref, whose lost answer
// its own next transaction must still look up. The caller holds the key
// lock, so no transaction of the key runs meanwhile.
func (e *Engine) settleUnlessLive(key PodKey) {
	if e.keys.state(key).current == "" {
		e.keys.setUnsettled(key, false)
	}
}
