package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// releaseUndelivered releases a VM that this node made (Identity.Owns) and
// never delivered, and reports whether it did. sandboxd finishes a claim
// after its caller has gone, and the VM shows in the index only then: a
// claim whose answer was lost while the node was still provisioning can
// leave a VM that the key's next lookup did not see yet, and the Pod got
// another one. So can a generation that was deleted or replaced before its
// lost answer was recovered: each generation looks up only its own
// claim_ref (Identity.selector), so no later one takes that VM, and this
// is its release. No user was ever given such a VM, so no owner's
// authority is needed to free it; one Pod ends with one VM.
//
// A VM counts as undelivered only when, under its key's lock, no row holds
// it (durable, quarantined or tentative) and it is older than SettleWindow
// (see bornBy; firstSeen is when this process first listed it): a younger
// one may still be recovered by its generation's next transaction. A key whose
// transaction is in flight is skipped (tryLock). Without the root token
// the VM cannot be read or released by id, and it is only reported.
func (e *Engine) releaseUndelivered(ctx context.Context, r pool.Sandbox, firstSeen time.Time) bool {
	key, _, ok := e.owns(r)
	if !ok || e.cfg.Clock.Since(bornBy(r, firstSeen)) < e.cfg.SettleWindow || e.sbx.Tenant() {
		return false
	}
	unlock, ok := e.keys.tryLock(key)
	if !ok {
		return false
	}
	defer unlock()
	if c, st := e.keys.lookup(key); st != stateNone && c.ID == r.ID {
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
	e.obs.Decision(ctx, decisionRelease, "undelivered")
	e.log.InfoContext(ctx, "released a VM this node made for a Pod and never delivered (a claim that finished after its answer was lost)",
		"pod", key, "claim", r.ID)
	return true
}

// bornBy is the time from which an unheld VM's age is judged: no earlier
// than the VM entered sandboxd's index, so that the age is never
// overstated and a VM that its key's next lookup could still recover is
// never released.
//
// A row's claimed_at (V2+) is that time, by the server. A V1 row has none:
// its age is then counted from when this process first listed it
// (firstSeen), which is never before the VM entered the index. That only
// understates the age: after a restart the count starts again, and such a
// VM waits one more settle window.
//
// A deadline minus the TTL the node asked for is not used: the grant is
// not the ask (a ttl_seconds of 0 takes the server's default, a larger one
// is clamped at 24 h, so a deadline minus the ask can fall before the VM
// existed), the ask is known only while the Pod that made it is, and the
// deadline is on the server's clock where the age is judged on the node's.
func bornBy(r pool.Sandbox, firstSeen time.Time) time.Time {
	if r.ClaimedAt != nil {
		return *r.ClaimedAt
	}
	return firstSeen
}

// firstSeen is when this process first listed each VM it made and holds no
// row for: the age of a row without claimed_at (see bornBy). It is exact
// state, owned by the orphan scan's loop, and holds only ids of the last
// listing, so it never outgrows the listing.
type firstSeen map[string]time.Time

// update is the book after a listing that has ids, at now: an id listed
// before keeps its time, a new one is stamped now, and one no longer listed
// is forgotten (a sandbox id is never reused).
func (f firstSeen) update(ids []string, now time.Time) firstSeen {
	next := make(firstSeen, len(ids))
	for _, id := range ids {
		t, ok := f[id] // the age grows from the first listing, never reset
		if !ok {
			t = now // first listed now
		}
		next[id] = t
	}
	return next
}
