package pipeline

import (
	"context"
	"errors"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// releaseUndelivered releases a VM that this node made (Identity.Owns) and
// never delivered, and reports whether it did. sandboxd finishes a claim
// after its caller has gone, and the VM shows in the index only then: a
// claim whose answer was lost while the node was still provisioning can
// leave a VM that the key's next lookup did not see yet, and the Pod got
// another one. No user was ever given such a VM, so no owner's authority
// is needed to free it; one Pod ends with one VM.
//
// A VM counts as undelivered only when, under its key's lock, no row holds
// it (durable, quarantined or tentative) and it is older than SettleWindow:
// a younger one may still be recovered by its key's next transaction. A
// key whose transaction is in flight is skipped (tryLock). Without the root
// token the VM cannot be read or released by id, and it is only reported.
func (e *Engine) releaseUndelivered(ctx context.Context, r pool.Sandbox) bool {
	key, ok := e.owns(r)
	if !ok || r.ClaimedAt == nil || e.cfg.Clock.Since(*r.ClaimedAt) < e.cfg.SettleWindow || e.sbx.Tenant() {
		return false
	}
	unlock, ok := e.keys.tryLock(key)
	if !ok {
		return false
	}
	defer unlock()
	if c, st := e.keys.lookup(key); st != StateNone && c.ID == r.ID {
		return false // delivered after the listing
	}
	// The read proves the VM is still there; its token, where the server
	// has the token read (V2+), is the credential. A root read without one
	// (V1) leaves the root token, which every version from V1 accepts.
	full, err := e.sbx.Get(ctx, r.ID)
	if err != nil {
		if !errors.Is(err, pool.ErrNotFound) {
			e.log.WarnContext(ctx, "orphan scan: the credential of an undelivered VM could not be fetched", "pod", key, "claim", r.ID, "error", err)
		}
		return false
	}
	if err := e.releaseVM(ctx, key, r.ID, full.Token); err != nil {
		e.log.WarnContext(ctx, "orphan scan: release of an undelivered VM failed; tried again next scan", "pod", key, "claim", r.ID, "error", err)
		return false
	}
	e.obs.Decision(ctx, DecisionRelease, "undelivered")
	e.log.InfoContext(ctx, "released a VM this node made for a Pod and never delivered (a claim that finished after its answer was lost)",
		"pod", key, "claim", r.ID)
	return true
}
