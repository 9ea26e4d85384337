package pipeline

import (
	"context"
	"time"
)

// reauthorize asks again, every interval, the recorded owner of each claim
// that is held for a Pod that no longer exists, and releases the claim on
// a release verdict. Two cases leave such a claim:
//   - a delete preserved it (an eviction while the owner lived) and the
//     owner was then deleted before any replacement Pod came, or the owner
//     GET failed during a cascading delete: without this the VM would be
//     held until its lease ends;
//   - its release failed (sandboxd down) for a Pod that virtual-kubelet
//     will not delete again, such as a restored Pod deleted while this
//     process was down (virtual-kubelet deletes a dangling Pod once).
//
// The verdict comes from the owner recorded with the claim, never from a
// Pod (see OwnerAuthority). A replacement Pod that adopts the claim takes
// it out of this loop. The owner is asked before the key lock is taken,
// and the claim is re-checked under it; a key that is busy is looked at on
// the next pass.
func (e *Engine) reauthorize(ctx context.Context, interval time.Duration) {
	e.every(ctx, LoopReauthorize, interval, func() { e.reauthorizeOnce(ctx) })
}

func (e *Engine) reauthorizeOnce(ctx context.Context) {
	for key, id := range e.keys.detachedRows() {
		if ctx.Err() != nil {
			return
		}
		c, st := e.keys.lookup(key)
		if st == stateNone || c.ID != id {
			e.dropDetached(key, id) // gone, or another claim now: nothing to ask
			continue
		}
		v := e.owners(ctx, key, viewOf(c, StateDurable))
		if !v.Release {
			continue
		}
		e.reauthorizeRelease(ctx, key, id, v)
	}
}

func (e *Engine) reauthorizeRelease(ctx context.Context, key PodKey, id string, v Verdict) {
	unlock, ok := e.keys.tryLock(key)
	if !ok {
		return
	}
	defer unlock()
	c, st := e.keys.lookup(key)
	if st == stateNone || c.ID != id || !e.keys.isDetached(key, id) {
		return // adopted or released meanwhile
	}
	if err := e.release(ctx, key, c, st, "reauthorized/"+v.Reason); err != nil {
		e.log.WarnContext(ctx, "release of a claim whose Pod is gone failed; asked again next pass", "pod", key, "claim", id, "error", err)
	}
}

// dropDetached ends the detached mark of a key whose row no longer holds
// claim id, under the key lock; a busy key is looked at next pass.
func (e *Engine) dropDetached(key PodKey, id string) {
	unlock, ok := e.keys.tryLock(key)
	if !ok {
		return
	}
	defer unlock()
	if c, st := e.keys.lookup(key); e.keys.isDetached(key, id) && (st == stateNone || c.ID != id) {
		e.keys.attach(key)
	}
}
