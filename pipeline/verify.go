package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// verifyStartup runs the startup listing until one succeeds. That one
// listing does two things:
//   - it marks unsettled every key for which sandboxd holds a VM that this
//     node made (Identity.Owns) and that no row holds: a claim the previous process made and never made
//     durable (killed between the claim and the fsync, or a rollback
//     release that failed). Such a VM was never reported Running, so it
//     serves no one; the next transaction for its key recovers it instead
//     of claiming a second VM (see maybeUnheld);
//   - it lifts quarantine from rows loaded off disk: a listed row becomes
//     durable and adoptable, and so does one a root read of its id finds;
//     a row whose id a root read answers 404 is dropped (the VM is already
//     gone, so nothing is released). See proveGone.
//
// A failed listing marks and drops nothing. Once no quarantined row
// remains, the loop ends.
func (e *Engine) verifyStartup(ctx context.Context) {
	defer close(e.verified)
	eb := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(e.cfg.VerifyInterval),
		backoff.WithMaxElapsedTime(0), // until it succeeds or ctx ends
	)
	// An outage is warned about once a minute, not on every retry (one to
	// two seconds apart); the retries in between are logged at debug.
	var failed int
	var warned time.Time
	try := func() (err error) {
		e.pass(LoopVerify, func() { err = e.verifyOnce(ctx) })
		return err
	}
	err := backoff.RetryNotify(try, backoff.WithContext(eb, ctx),
		func(err error, wait time.Duration) {
			failed++
			level := slog.LevelDebug
			if e.cfg.Clock.Since(warned) >= verifyWarnEvery {
				level, warned = slog.LevelWarn, e.cfg.Clock.Now()
			}
			e.log.Log(ctx, level, "startup verification: sandboxd listing failed; loaded rows stay quarantined",
				"error", err, "retry_in", wait, "failed_listings", failed)
		})
	if err == nil && failed > 0 {
		e.log.Info("startup verification: sandboxd listed the node again", "failed_listings", failed)
	}
}

// verifyWarnEvery is how often a sandboxd outage during startup
// verification is warned about.
const verifyWarnEvery = time.Minute

func (e *Engine) verifyOnce(ctx context.Context) error {
	// The whole listing: quarantined rows are vouched for by sandbox id,
	// whoever made them (rows migrated from the JSON claims document carry
	// no labels).
	rows, err := e.sbx.List(ctx, pool.ListOptions{})
	if err != nil {
		return err
	}
	first := !e.startupListed()
	listed := make(map[string]struct{}, len(rows))
	unheld := 0
	for _, r := range rows {
		listed[r.ID] = struct{}{}
		if !first {
			continue
		}
		// Only a VM this node made marks its key: another client's VM under
		// a look-alike claim_ref (no valid mark) is none of this node's
		// business, and is said once here.
		key, _, ours := e.owns(r)
		if !ours {
			if _, held := e.store.Holder(r.ID); e.foreign(r, held) {
				e.log.Warn("startup verification: a sandbox under this node's claim_ref form without this node's mark is another client's (or from before the mark, held by no row); never adopted, recovered or released",
					"sandbox", r.ID, "claim_ref", r.ClaimRef)
			}
			continue
		}
		if c, st := e.keys.lookup(key); st == stateNone || c.ID != r.ID {
			e.keys.setUnsettled(key, true)
			unheld++
		}
	}
	if first {
		close(e.listed)
		if unheld > 0 {
			e.log.Warn("sandboxd holds VMs that no claim row holds (claims in flight when the last process stopped); their keys recover them instead of claiming again",
				"sandboxes", unheld)
		}
	}
	var lifted, dropped, unproven int
	var failed error
	for _, key := range e.keys.quarantinedKeys() {
		unlock, ok := e.keys.tryLock(key)
		if !ok {
			failed = errKeyBusy // stays quarantined; the next try looks again
			continue
		}
		c, st := e.keys.lookup(key)
		if st == StateQuarantined {
			_, ok := listed[c.ID]
			switch gone, err := e.proveGone(ctx, ok, c.ID); {
			case err == errUnprovable:
				unproven++ // stays quarantined: see proveGone
			case err != nil:
				failed = err // stays quarantined; the next try asks again
			case !gone:
				e.keys.lift(key)
				lifted++
				e.obs.Decision(ctx, decisionQuarantineLifted, "listed")
			default:
				if err := e.store.Delete(ctx, string(key)); err != nil {
					failed = err // stays quarantined; the next try drops it
					break
				}
				e.forgetRow(key)
				dropped++
				e.obs.Decision(ctx, decisionQuarantineDropped, "gone")
				e.log.Info("dropped a loaded claim whose VM sandboxd confirms is gone", "pod", key, "claim", c.ID)
			}
		}
		unlock()
	}
	if lifted+dropped > 0 {
		e.log.Info("quarantine verification", "lifted", lifted, "dropped", dropped)
	}
	if unproven > 0 && failed == nil {
		e.log.Warn("claims loaded from the state file are not in the listing this token may see, and without the root token nothing proves them gone; they keep their release credentials and stay quarantined (not Running, not adopted) until a delete releases them or the node gets the root token",
			"rows", unproven)
	}
	return failed
}

// errUnprovable: a row is not in a listing that may be partial, and the
// token cannot read a sandbox by id to tell gone from hidden.
var errUnprovable = errors.New("absent from a tenant-scoped listing; the by-id read needs the root token")

// proveGone decides whether the VM of a row is gone. A row is dropped only
// on proof that its VM is gone, never from its absence in a listing: a
// tenant token lists only its own claims (a row claimed under the root
// token is not in it), and a sandboxd that is still restoring its index may
// answer a short listing. The proof is a root read of the id answering 404.
// A listed VM is there. An unlisted one is read by id: 404 is gone, a row
// is there; a tenant token cannot read by id, so nothing is proven
// (errUnprovable).
func (e *Engine) proveGone(ctx context.Context, listed bool, id string) (gone bool, err error) {
	if listed {
		return false, nil
	}
	if e.sbx.Tenant() {
		return false, errUnprovable
	}
	_, err = e.sbx.Get(ctx, id)
	switch {
	case errors.Is(err, pool.ErrNotFound):
		return true, nil
	case errors.Is(err, pool.ErrForbidden):
		return false, errUnprovable
	}
	return false, err
}

var errKeyBusy = errors.New("a delete holds a quarantined key")

// startupListed reports whether the startup listing has succeeded.
func (e *Engine) startupListed() bool {
	select {
	case <-e.listed:
		return true
	default:
		return false
	}
}

// maybeUnheld reports whether sandboxd may hold a VM under key that no row
// holds: the key is unsettled, or the startup listing has not told yet.
// Only then does a transaction pay for a claim_ref lookup.
func (e *Engine) maybeUnheld(key PodKey) bool {
	return !e.startupListed() || e.keys.isUnsettled(key)
}
