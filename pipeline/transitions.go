package pipeline

import (
	"time"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// Every change to a key's state (keyState), and every read of it, is here;
// the lock rule is stated at records. The claim states and the moves
// between them are drawn in the package doc.

// tombstoneTTL is how long a deleted Pod generation is remembered. A
// tombstone is a safety rule, so its store is synchronous and exact: one
// set is readable at once, and it is dropped only past this age, or when
// Config.Tombstones newer ones followed it (least recently set first). The
// current-UID check still stops an old generation whose tombstone went.
const tombstoneTTL = 10 * time.Minute

// Generations. virtual-kubelet queues work by namespace/name, and may
// force-delete a Pending Pod without calling DeletePod; when the same-name
// replacement arrives, the old UID's intent is cancelled (Engine.Create),
// and a transaction that still runs for it finds under the key lock that
// its UID is no longer current, and stops. A delete leaves a tombstone for
// its UID, which stops a transaction that took its intent just before the
// delete. A create for the UID lifts the tombstone: virtual-kubelet
// creates only Pods its informer shows alive and not terminating, and it
// can call DeletePod for a Pod that still lives (its sync deletes whatever
// the provider holds for a key its informer does not show yet), so a
// create is the newer word.

// born records uid as key's current generation, lifting a tombstone it may
// have, and returns the UID it replaced ("" for none).
func (rs *records) born(key PodKey, uid string) (replaced string) {
	rs.dead.Remove(uid)
	rs.update(key, func(s *keyState) {
		if s.current != uid {
			replaced = s.current
		}
		s.current = uid
	})
	return replaced
}

// died tombstones uid and, if it is key's current generation, ends it.
func (rs *records) died(key PodKey, uid string) {
	rs.dead.Add(uid, struct{}{}, tombstoneTTL)
	rs.update(key, func(s *keyState) {
		if s.current == uid {
			s.current = ""
		}
	})
}

func (rs *records) deleted(uid string) bool {
	_, ok := rs.dead.Get(uid)
	return ok
}

// live reports whether a transaction for uid may act on key: uid is the
// key's current generation and was not deleted. The caller holds the key
// lock, so the answer holds for the rest of its transaction, except that
// a delete may still tombstone uid; that delete then waits for the lock.
func (rs *records) live(key PodKey, uid string) bool {
	return !rs.deleted(uid) && rs.state(key).current == uid
}

// lookup returns the row for key and its state. O(1).
func (rs *records) lookup(key PodKey) (store.Claim, State) {
	s := rs.state(key)
	if s.hasTentative {
		return s.tentative, StateTentative
	}
	c, ok := rs.st.Get(string(key))
	switch {
	case !ok:
		return store.Claim{}, stateNone
	case s.quarantined:
		return c, StateQuarantined
	}
	return c, StateDurable
}

// holdTentative records c as key's tentative claim unless a row already
// holds its sandbox id (a durable, quarantined or tentative row), in which
// case it returns the holder's key. The check and the record are one step, so two
// keys handed the same id at once never both take it.
func (rs *records) holdTentative(key PodKey, c store.Claim) (holder PodKey, held bool) {
	rs.idMu.Lock()
	defer rs.idMu.Unlock()
	if k, ok := rs.ids[c.ID]; ok {
		return k, true
	}
	if k, ok := rs.st.Holder(c.ID); ok {
		return PodKey(k), true
	}
	rs.putTentativeLocked(key, c)
	return "", false
}

// setTentative records c as key's tentative claim when the claim is key's
// already: a tentative claim adopted by a new generation of the key, which
// retries its commit.
func (rs *records) setTentative(key PodKey, c store.Claim) {
	rs.idMu.Lock()
	defer rs.idMu.Unlock()
	rs.putTentativeLocked(key, c)
}

func (rs *records) putTentativeLocked(key PodKey, c store.Claim) {
	rs.update(key, func(s *keyState) {
		if s.hasTentative {
			delete(rs.ids, s.tentative.ID)
		}
		s.tentative, s.hasTentative = c, true
	})
	rs.ids[c.ID] = key
}

// clearTentative drops key's tentative claim: it is durable now, or it was
// released.
func (rs *records) clearTentative(key PodKey) {
	rs.idMu.Lock()
	defer rs.idMu.Unlock()
	rs.update(key, func(s *keyState) {
		if s.hasTentative {
			delete(rs.ids, s.tentative.ID)
			s.tentative, s.hasTentative = store.Claim{}, false
		}
	})
}

// quarantineAll marks every row loaded from disk. Called once, before any
// worker runs.
func (rs *records) quarantineAll() int {
	n := 0
	rs.st.Range(func(key string, _ store.Claim) bool {
		rs.update(PodKey(key), func(s *keyState) { s.quarantined = true })
		n++
		return true
	})
	rs.quarantined.Add(int64(n))
	return n
}

// lift ends key's quarantine: a listing vouched for its row.
func (rs *records) lift(key PodKey) {
	rs.update(key, func(s *keyState) { rs.unquarantine(s) })
}

func (rs *records) unquarantine(s *keyState) {
	if s.quarantined {
		s.quarantined = false
		rs.quarantined.Add(-1)
	}
}

// quarantinedKeys lists the keys still quarantined: none, without a scan,
// once every row was vouched for or dropped.
func (rs *records) quarantinedKeys() []PodKey {
	if rs.quarantined.Load() == 0 {
		return nil
	}
	var keys []PodKey
	rs.each(func(key PodKey, s *keyState) {
		if s.quarantined {
			keys = append(keys, key)
		}
	})
	return keys
}

func (rs *records) isUnsettled(key PodKey) bool { return rs.state(key).unsettled }

func (rs *records) setUnsettled(key PodKey, on bool) {
	rs.update(key, func(s *keyState) { s.unsettled = on })
}

// detach marks key's claim id as held for a Pod that is gone.
func (rs *records) detach(key PodKey, id string) {
	rs.update(key, func(s *keyState) { s.detached = id })
}

// attach ends the detached mark: a live Pod holds the claim again, or the
// claim went.
func (rs *records) attach(key PodKey) {
	rs.update(key, func(s *keyState) { s.detached = "" })
}

func (rs *records) isDetached(key PodKey, id string) bool {
	d := rs.state(key).detached
	return d != "" && d == id
}

// detachedRows snapshots the detached keys and the claim IDs they hold.
func (rs *records) detachedRows() map[PodKey]string {
	rows := map[PodKey]string{}
	rs.each(func(key PodKey, s *keyState) {
		if s.detached != "" {
			rows[key] = s.detached
		}
	})
	return rows
}

// setLifetime records the ttl-seconds key's Pod asked for, as its
// transaction publishes Running.
func (rs *records) setLifetime(key PodKey, ttlSeconds int64) {
	rs.update(key, func(s *keyState) { s.lifetime, s.hasLifetime = ttlSeconds, true })
}

// lifetimeOf is the ttl-seconds the key's Pod asked for; false when no Pod
// has been published Running for it since this process started.
func (rs *records) lifetimeOf(key PodKey) (int64, bool) {
	s := rs.state(key)
	return s.lifetime, s.hasLifetime
}

// leaseReady reports whether the lease watch may look at key now.
func (rs *records) leaseReady(key PodKey, now time.Time) bool {
	l := rs.state(key).lease
	return l == nil || !now.Before(l.next)
}

// leaseFailed puts key's next look one backoff step (from initial) later.
func (rs *records) leaseFailed(key PodKey, now time.Time, initial time.Duration) {
	rs.update(key, func(s *keyState) {
		if s.lease == nil {
			s.lease = newLeaseRetry(initial)
		}
		s.lease.next = now.Add(s.lease.bo.NextBackOff())
	})
}

// leaseDecided drops key's lease backoff: its last look decided.
func (rs *records) leaseDecided(key PodKey) {
	rs.update(key, func(s *keyState) { s.lease = nil })
}

// forget drops every mark of a key whose row was deleted (see
// Engine.forgetRow). current and unsettled stay: they are about the Pod
// and sandboxd, not the row.
func (rs *records) forget(key PodKey) {
	rs.update(key, func(s *keyState) {
		rs.unquarantine(s)
		s.detached, s.lifetime, s.hasLifetime, s.lease = "", 0, false, nil
	})
}

// counts reports held (durable and vouched), quarantined and tentative rows.
func (rs *records) counts() (held, quarantined, tentative int) {
	q := int(rs.quarantined.Load())
	rs.idMu.Lock()
	tn := len(rs.ids)
	rs.idMu.Unlock()
	return rs.st.Len() - q, q, tn
}
