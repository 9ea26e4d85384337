package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// Pending reasons surfaced on the Pod. None of them is terminal.
const (
	ReasonCapacity      = "SandboxCapacityMiss"
	ReasonClaimFailed   = "SandboxClaimFailed"
	ReasonQuarantined   = "SandboxClaimQuarantined"
	ReasonStateWrite    = "SandboxStateWriteFailed"
	reasonReleasePrior  = "SandboxReleasePending"
	ReasonLostClaim     = "SandboxClaimUnrecoverable"
	ReasonQueueFull     = "SandboxQueueFull"
	ReasonOwnerConflict = "SandboxOwnerConflict"
)

// Claim transaction outcomes: the vksandbox.outcome span attribute and the
// outcome label of vksandbox_claim_duration_seconds. This package owns the
// vocabulary; telemetry records whatever it is handed.
const (
	OutcomeRunning    = "running"
	outcomeAdopted    = "adopted"
	OutcomeCapacity   = "capacity_miss"
	OutcomeError      = "error"
	OutcomeRolledBack = "rolled_back"
	outcomeWaiting    = "waiting"
	// outcomeSuperseded: the Pod generation was deleted or replaced before
	// its transaction ran; nothing was done for it.
	outcomeSuperseded = "superseded"
	// outcomeDeferred: the shard was full; the intent is offered again.
	outcomeDeferred = "deferred"
)

// Outcomes lists every outcome a finished transaction records (deferred is
// a span attribute only: a deferred intent has not run). Each call returns
// a fresh slice, so no caller can change the vocabulary.
func Outcomes() []string {
	return []string{OutcomeRunning, outcomeAdopted, OutcomeCapacity, OutcomeError, OutcomeRolledBack, outcomeWaiting, outcomeSuperseded}
}

// Decision kinds: the kind label of vksandbox_decisions_total. Reasons are
// the verdict reasons and a few fixed words, never an error string.
const (
	decisionAdopt             = "adopt"
	decisionPreserve          = "preserve"
	decisionRelease           = "release"
	decisionReleaseFailed     = "release_failed"
	decisionRenew             = "renew"
	decisionQuarantineLifted  = "quarantine_lifted"
	decisionQuarantineDropped = "quarantine_dropped"
	decisionLeaseExpired      = "lease_expired"
)

// DecisionKinds lists every decision kind, in a fresh slice each call.
func DecisionKinds() []string {
	return []string{decisionAdopt, decisionPreserve, decisionRelease, decisionReleaseFailed, decisionRenew,
		decisionQuarantineLifted, decisionQuarantineDropped, decisionLeaseExpired}
}

// errUnrecoverable: a sandbox exists for this claim_ref, but its credential
// cannot be fetched (no root token). It is left to its lease, never claimed
// over: a second claim would double the VM.
var errUnrecoverable = errors.New("a sandbox from a lost claim response exists, and its token cannot be recovered without the root token; it is left to its lease")

type txResult struct {
	outcome string
	retry   bool
	err     error
}

func done(outcome string) txResult { return txResult{outcome: outcome} }

// reconcile brings one Pod generation to Running, or to a Pending reason
// and a retry. The key lock makes it exclusive with every other generation
// of the same pod key, and with deletes.
func (e *Engine) reconcile(ctx context.Context, it Intent) txResult {
	ref := it.Ref
	defer e.keys.lock(ref.Key)()
	// Only the key's current, undeleted generation acts on its claim (see
	// live, transitions.go): a leftover intent of a replaced or deleted Pod would
	// otherwise release, rebind or claim for a Pod that is gone.
	if !e.keys.live(ref.Key, ref.UID) {
		return done(outcomeSuperseded)
	}
	c, st := e.keys.lookup(ref.Key)
	switch st {
	case stateNone:
		return e.claimFresh(ctx, it)
	case StateQuarantined:
		// Not adoptable, not Running, and never claimed over.
		if c.PodUID != ref.UID {
			e.pending(ctx, ref, ReasonQuarantined, "a claim for this pod key was loaded from the state file and is waiting for sandboxd to vouch for it")
		}
		return txResult{outcome: outcomeWaiting, retry: true}
	case StateTentative:
		if c.PodUID == ref.UID || e.ownerMatches(ctx, ref.Key, c, ref) {
			adopted := c.PodUID != ref.UID
			c.PodUID = ref.UID
			// The tentative claim is this generation's now; its durable
			// write is retried.
			e.keys.setTentative(ref.Key, c)
			return e.persistOrRollBack(ctx, it, c, adopted)
		}
	case StateDurable:
		if c.PodUID == ref.UID && c.OwnerKnown() {
			e.publishRunning(ctx, it, c, false)
			return done(OutcomeRunning)
		}
		if c.PodUID == ref.UID || e.ownerMatches(ctx, ref.Key, c, ref) {
			return e.adopt(ctx, it, c)
		}
	}
	// The claim was made for another owner generation. The new Pod's own
	// ownerReference is no authority over it (anyone who may create Pods
	// in the namespace can forge one): only the recorded owner's verdict
	// releases it. While that owner lives, the new Pod waits.
	v := e.owners(ctx, ref.Key, viewOf(c, StateDurable))
	if !v.Release {
		// The Pod the claim was made for is gone: the key's current
		// generation is ref. virtual-kubelet may have replaced it without
		// a DeletePod (a delete and a create synced as one update), so
		// nothing else would ask its owner again. Held for a Pod that is
		// gone, the claim is re-authorized periodically, and released once
		// its recorded owner is gone, whatever becomes of this Pod.
		e.keys.detach(ref.Key, c.ID)
		msg := fmt.Sprintf("%s: the pod key holds VM %s for another owner (%s), which has not given it up (%s)", ref.Key, c.ID, ownerName(c), v.Reason)
		e.pending(ctx, ref, ReasonOwnerConflict, msg)
		return txResult{outcome: outcomeWaiting, retry: true}
	}
	if err := e.release(ctx, ref.Key, c, st, "owner-changed/"+v.Reason); err != nil {
		e.pending(ctx, ref, reasonReleasePrior, err.Error())
		return txResult{outcome: OutcomeError, retry: true, err: err}
	}
	return e.claimFresh(ctx, it)
}

// ownerMatches is the adoption rule: the same controller owner, compared in
// full (apiVersion/kind/name and UID), or no owner on either side. A UID
// alone is no proof: a Pod may copy a live owner's UID under another
// owner's name. Adopting on the Pod's name alone would hand an old VM to a
// new owner.
//
// Two kinds of row record less than a full owner:
//   - owner unknown (migrated from the JSON claims document): adopted by the
//     next Pod of its key, which records its owner; nothing could
//     authorize releasing it;
//   - owner UID without a name (an older row format): adopted only by a
//     Pod whose named owner, read fresh, is the object with that UID.
func (e *Engine) ownerMatches(ctx context.Context, key PodKey, c store.Claim, ref PodRef) bool {
	switch {
	case !c.OwnerKnown():
		return true
	case c.OwnerUID != ref.OwnerUID:
		return false
	case c.Owner != "" || c.OwnerUID == "":
		return c.Owner == ref.Owner
	}
	named := viewOf(c, StateDurable)
	named.Owner = ref.Owner
	v := e.owners(ctx, key, named)
	return !v.Release && v.FromOwner // that owner, alive
}

func ownerName(c store.Claim) string {
	if c.Owner == "" {
		return "uid " + c.OwnerUID
	}
	return c.Owner
}

// adopt rebinds the key's claim to ref's Pod, durably, then publishes it.
// ownerMatches admitted ref's owner, so recording it changes a known owner
// not at all, and fills in an unknown one or a missing name.
func (e *Engine) adopt(ctx context.Context, it Intent, c store.Claim) txResult {
	ref := it.Ref
	same := c.PodUID == ref.UID
	c.PodUID, c.OwnerUID, c.Owner = ref.UID, ref.OwnerUID, ref.Owner
	if res, ok := e.persist(ctx, ref, c); !ok {
		return res
	}
	if same { // the Pod the row was made for: only its owner was unknown
		e.log.InfoContext(ctx, "recorded the owner of a claim whose owner was unknown", "pod", ref.Key, "claim", c.ID, "owner", ownerName(c))
		e.publishRunning(ctx, it, c, false)
		return done(OutcomeRunning)
	}
	reason := "same-owner"
	if c.OwnerUID == "" {
		reason = "bare-pod"
	}
	e.obs.Decision(ctx, decisionAdopt, reason)
	e.log.InfoContext(ctx, "adopted claim in place", "pod", ref.Key, "claim", c.ID, "reason", reason)
	e.publishRunning(ctx, it, c, true)
	return done(outcomeAdopted)
}

func (e *Engine) claimFresh(ctx context.Context, it Intent) txResult {
	ref := it.Ref
	resp, err := e.claimAtSandboxd(ctx, it)
	switch {
	case errors.Is(err, pool.ErrCapacity):
		e.pending(ctx, ref, ReasonCapacity, fmt.Sprintf("%s: sandboxd has no capacity for template %q: %v", ref.Key, it.Spec.Template, err))
		return txResult{outcome: OutcomeCapacity, retry: true}
	case errors.Is(err, errUnrecoverable):
		e.log.WarnContext(ctx, "lost claim response cannot be recovered", "pod", ref.Key, "error", err)
		e.pending(ctx, ref, ReasonLostClaim, err.Error())
		return txResult{outcome: OutcomeError, retry: true, err: err}
	case err != nil:
		err = keyErr(ref.Key, "claim", err)
		e.pending(ctx, ref, ReasonClaimFailed, err.Error())
		return txResult{outcome: OutcomeError, retry: true, err: err}
	}
	c := store.Claim{
		ID: resp.ID, Token: resp.Token, Address: resp.OwnerAddr, PodUID: ref.UID,
		ClaimedAt: e.cfg.Clock.Now().UTC().Truncate(time.Second), Deadline: resp.Deadline,
		OwnerUID: ref.OwnerUID, Owner: ref.Owner,
	}
	if holder, held := e.keys.holdTentative(ref.Key, c); held {
		// A claim answer is accepted for one key only. An answer naming a
		// VM another key holds is a replay (sandboxd, a proxy, a retry
		// layer): taking it would put two Pods on one VM, and a release for
		// either would destroy the other's. The check and the tentative record
		// are one step (holdTentative). Nothing is recorded and nothing
		// is released; the key's next attempt first looks its own claim up
		// by claim_ref, in case the real answer was the one lost.
		e.keys.setUnsettled(ref.Key, true)
		err := keyErr(ref.Key, "claim", fmt.Errorf("%w: sandboxd answered with VM %s, which %s already holds", pool.ErrBadResponse, resp.ID, holder))
		e.log.ErrorContext(ctx, "claim answer refused: its VM is held by another pod key", "pod", ref.Key, "claim", resp.ID, "holder", holder)
		e.pending(ctx, ref, ReasonClaimFailed, err.Error())
		return txResult{outcome: OutcomeError, retry: true, err: err}
	}
	return e.persistOrRollBack(ctx, it, c, false)
}

// persistOrRollBack makes c, the key's tentative claim already
// (holdTentative or setTentative), durable, then publishes Running
// (in that order: see publishRunning). If the durable write fails, the
// claim just taken is released (rollback); if that fails too, the
// tentative row keeps the credential in memory so that a retry or a later
// delete can still reach the VM.
func (e *Engine) persistOrRollBack(ctx context.Context, it Intent, c store.Claim, adopted bool) txResult {
	ref := it.Ref
	if res, ok := e.persist(ctx, ref, c); !ok {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.ReleaseTimeout)
		defer cancel()
		if rerr := e.releaseVM(rctx, ref.Key, c.ID, c.Token); rerr != nil {
			e.log.ErrorContext(ctx, "rollback release failed; the credential stays in memory for a later delete",
				"pod", ref.Key, "claim", c.ID, "error", rerr)
			return res
		}
		e.keys.clearTentative(ref.Key)
		e.obs.Decision(ctx, decisionRelease, "rollback")
		res.outcome = OutcomeRolledBack
		return res
	}
	e.keys.clearTentative(ref.Key)
	e.publishRunning(ctx, it, c, adopted)
	if adopted {
		return done(outcomeAdopted)
	}
	return done(OutcomeRunning)
}

// persist writes the row durably. The write runs on a context that the
// caller cannot cancel: Put then reports the true outcome, never "maybe".
func (e *Engine) persist(ctx context.Context, ref PodRef, c store.Claim) (txResult, bool) {
	cctx, span := e.tracer.Start(ctx, "store.commit", trace.WithAttributes(attribute.String("vksandbox.claim.id", c.ID)))
	err := e.store.Put(context.WithoutCancel(cctx), string(ref.Key), c)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	if err != nil {
		err = keyErr(ref.Key, "durable commit", err)
		e.log.ErrorContext(ctx, "claim not durable", "pod", ref.Key, "claim", c.ID, "error", err)
		e.pending(ctx, ref, ReasonStateWrite, err.Error())
		return txResult{outcome: OutcomeError, retry: true, err: err}, false
	}
	return txResult{}, true
}

// claimAtSandboxd asks sandboxd for a VM. Transient failures are retried with
// backoff; because a claim is not idempotent, any retry after an answer that
// may have been lost first looks the claim up by claim_ref.
func (e *Engine) claimAtSandboxd(ctx context.Context, it Intent) (pool.ClaimResponse, error) {
	// The claim_ref names this Pod generation: its lost answer is looked
	// up by it, and no other generation's lookup ever finds the VM.
	claimRef, err := e.id.ClaimRef(it.Ref.Key, it.Ref.UID)
	if err != nil {
		return pool.ClaimResponse{}, err // a UID no apiserver makes: nothing was claimed
	}
	req := pool.ClaimRequest{
		Template: it.Spec.Template, Net: it.Spec.Net, Size: it.Spec.Size,
		TTLSeconds: grantAsked(it.Spec.TTLSeconds), ClaimRef: claimRef, Metadata: e.id.Labels(it.Ref),
		// The VM is wanted on this node: a meshed node then clones or
		// cold-boots locally instead of naming a peer.
		NoRedirect: true,
	}
	var resp pool.ClaimResponse
	// A lost answer outlives its transaction: a requeued transaction (after
	// errUnrecoverable or exhausted retries) must look up first as well, or
	// it claims a second VM for the same claim_ref.
	unsettled := e.keys.isUnsettled(it.Ref.Key)
	maybeClaimed := unsettled || !e.startupListed() // see maybeUnheld
	bo := e.cfg.ClaimRetry.NewBackOff(ctx)
	attempt := 0
	op := func() error {
		attempt++
		if maybeClaimed {
			r, found, err := e.recoverLost(ctx, it)
			if err != nil {
				bo.Observe(err)
				return retryable(err)
			}
			if found {
				resp = r
				return nil
			}
			maybeClaimed = false // the listing shows no VM of ours under claim_ref
		}
		r, err := e.sbx.Claim(ctx, req)
		if err == nil {
			e.NoteOwnerAddr(r.OwnerAddr)
			resp = r
			return nil
		}
		bo.Observe(err)
		if errors.Is(err, pool.ErrBadResponse) || pool.IsRetryable(err) {
			maybeClaimed = true
			trace.SpanFromContext(ctx).AddEvent("claim.retry", trace.WithAttributes(
				attribute.Int("attempt", attempt), attribute.String("error", err.Error())))
			return err
		}
		return backoff.Permanent(err)
	}
	err = backoff.Retry(op, backoff.WithContext(bo, ctx))
	if still := err != nil && maybeClaimed; still != unsettled {
		e.keys.setUnsettled(it.Ref.Key, still)
	}
	return resp, err
}

func retryable(err error) error {
	if errors.Is(err, errUnrecoverable) || !(pool.IsRetryable(err) || errors.Is(err, pool.ErrBadResponse)) {
		return backoff.Permanent(err)
	}
	return err
}

// publishRunning reports it.Ref Running on claim c. It first records the
// lifetime the Pod asks for, which the lease watch renews up to when the
// node grants less (see watchLeases); the caller holds the key lock.
//
// Durable before Running (this is the rule's one statement; docs link
// here): publishRunning is the only path to Reporter.Running, and it is
// called only with a claim the store has acknowledged. reconcile calls it
// for a row that is already StateDurable; adopt and persistOrRollBack call
// it only after persist returned nil, that is after Store.Put made the row
// durable (its group fsynced). A claim whose commit failed is never
// reported Running: it is rolled back instead. Because Running is the
// first time the Pod shows the VM (its IP, its claim id), no user is ever
// handed a VM whose release credential a crash could lose. A renewed
// deadline follows the same order (watchLeases).
func (e *Engine) publishRunning(ctx context.Context, it Intent, c store.Claim, adopted bool) {
	ref := it.Ref
	e.keys.setLifetime(ref.Key, it.Spec.TTLSeconds)
	e.keys.attach(ref.Key) // a live Pod holds the claim again
	e.warnIfNotRenewable(ctx, ref, c)
	sctx, span := e.tracer.Start(ctx, "status.push", trace.WithAttributes(
		attribute.String("vksandbox.claim.id", c.ID), attribute.Bool("vksandbox.adopted", adopted)))
	e.rep.Running(sctx, ref, viewOf(c, StateDurable), adopted)
	span.End()
}

func (e *Engine) pending(ctx context.Context, ref PodRef, reason, msg string) {
	sctx, span := e.tracer.Start(ctx, "status.push", trace.WithAttributes(attribute.String("vksandbox.pending.reason", reason)))
	e.rep.Pending(sctx, ref, reason, msg)
	span.End()
}
