package pipeline

import (
	"hash/maphash"
	"maps"
	"sync"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// table is the claim table: the store holds every durable row (it is the
// authority); the table only overlays what the store cannot say.
//   - tentative: claimed at sandboxd, not yet durable. Memory only. Kept
//     even when a rollback release failed, so that a later delete can still
//     reach the VM (no release credential is ever dropped).
//   - quarantined: durable rows loaded at startup that no sandboxd listing
//     has vouched for yet.
//   - unsettled: keys whose last claim attempt may have made a VM whose
//     answer was lost (no row). The next transaction for the key looks the
//     claim up by claim_ref before claiming, so no second VM leaks.
//   - detached: keys whose claim is held for a Pod that no longer exists
//     (a delete preserved it, or its release failed). Their recorded owner
//     is asked again periodically (Engine.Reauthorize). A Pod that takes
//     the claim over attaches it again.
//   - lifetime: the ttl-seconds the key's current Pod asked for, set when
//     its transaction publishes Running. Memory only: after a restart it is
//     set again when virtual-kubelet hands the Pod back.
//
// Every mutation of one key happens under that key's own lock (keyLocks);
// mu only guards the overlay maps themselves.
type table struct {
	st Store

	mu          sync.RWMutex
	tentative   map[string]store.Claim
	quarantined map[string]struct{}
	unsettled   map[string]struct{}
	lifetime    map[string]int64
	detached    map[string]string // key → claim ID held for a Pod that is gone
}

func newTable(st Store) *table {
	return &table{st: st, tentative: map[string]store.Claim{}, quarantined: map[string]struct{}{},
		unsettled: map[string]struct{}{}, lifetime: map[string]int64{}, detached: map[string]string{}}
}

// lookup returns the row for key and its state. O(1).
func (t *table) lookup(key string) (store.Claim, State) {
	t.mu.RLock()
	c, tent := t.tentative[key]
	_, quar := t.quarantined[key]
	t.mu.RUnlock()
	if tent {
		return c, StateTentative
	}
	c, ok := t.st.Get(key)
	switch {
	case !ok:
		return store.Claim{}, StateNone
	case quar:
		return c, StateQuarantined
	}
	return c, StateDurable
}

// holder returns the key whose row (durable, quarantined or tentative)
// holds claim id. O(1) in the store, plus the tentative rows, of which
// there are at most as many as transactions in flight.
func (t *table) holder(id string) (string, bool) {
	if key, ok := t.st.Holder(id); ok {
		return key, true
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	for key, c := range t.tentative {
		if c.ID == id {
			return key, true
		}
	}
	return "", false
}

func (t *table) setTentative(key string, c store.Claim) {
	t.mu.Lock()
	t.tentative[key] = c
	t.mu.Unlock()
}

func (t *table) clearTentative(key string) {
	t.mu.Lock()
	delete(t.tentative, key)
	t.mu.Unlock()
}

// quarantineAll marks every row loaded from disk. Called once, before any
// worker runs.
func (t *table) quarantineAll() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Range(func(key string, _ store.Claim) bool {
		t.quarantined[key] = struct{}{}
		return true
	})
	return len(t.quarantined)
}

func (t *table) isUnsettled(key string) bool {
	t.mu.RLock()
	_, ok := t.unsettled[key]
	t.mu.RUnlock()
	return ok
}

func (t *table) setUnsettled(key string, on bool) {
	t.mu.Lock()
	if on {
		t.unsettled[key] = struct{}{}
	} else {
		delete(t.unsettled, key)
	}
	t.mu.Unlock()
}

func (t *table) lift(key string) {
	t.mu.Lock()
	delete(t.quarantined, key)
	t.mu.Unlock()
}

// forget drops every overlay of a key whose row was deleted (see
// Engine.forgetRow).
func (t *table) forget(key string) {
	t.mu.Lock()
	delete(t.quarantined, key)
	delete(t.lifetime, key)
	delete(t.detached, key)
	t.mu.Unlock()
}

func (t *table) detach(key, id string) {
	t.mu.Lock()
	t.detached[key] = id
	t.mu.Unlock()
}

func (t *table) attach(key string) {
	t.mu.Lock()
	delete(t.detached, key)
	t.mu.Unlock()
}

func (t *table) isDetached(key, id string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.detached[key] == id
}

// detachedRows snapshots the detached keys and the claim IDs they hold.
func (t *table) detachedRows() map[string]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return maps.Clone(t.detached)
}

func (t *table) setLifetime(key string, ttlSeconds int64) {
	t.mu.Lock()
	t.lifetime[key] = ttlSeconds
	t.mu.Unlock()
}

// lifetimeOf is the ttl-seconds the key's Pod asked for; false when no Pod
// has been published Running for it since this process started.
func (t *table) lifetimeOf(key string) (int64, bool) {
	t.mu.RLock()
	n, ok := t.lifetime[key]
	t.mu.RUnlock()
	return n, ok
}

func (t *table) quarantinedKeys() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	keys := make([]string, 0, len(t.quarantined))
	for k := range t.quarantined {
		keys = append(keys, k)
	}
	return keys
}

// counts reports held (durable and vouched), quarantined and tentative rows.
func (t *table) counts() (held, quarantined, tentative int) {
	t.mu.RLock()
	q, tn := len(t.quarantined), len(t.tentative)
	t.mu.RUnlock()
	return t.st.Len() - q, q, tn
}

// keyLocks serialises work on one pod key across Pod generations (UIDs)
// and deletes. Each key has a mutex of its own, present only while it is
// held or awaited: unrelated keys never wait for each other, however long
// a sandboxd call under one of them takes, and memory is O(keys in use).
// The map is split in shards so that the claim path does not meet on one
// mutex.
type keyLocks struct {
	seed   maphash.Seed
	shards [64]keyLockShard
}

type keyLockShard struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; guarded by the shard's mu
}

func newKeyLocks() *keyLocks {
	l := &keyLocks{seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = map[string]*keyLock{}
	}
	return l
}

func (l *keyLocks) shard(key string) *keyLockShard {
	return &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
}

// lock blocks until key is free, and returns its unlock.
func (l *keyLocks) lock(key string) func() {
	sh := l.shard(key)
	sh.mu.Lock()
	k := sh.m[key]
	if k == nil {
		k = &keyLock{}
		sh.m[key] = k
	}
	k.refs++
	sh.mu.Unlock()
	k.mu.Lock()
	return func() { sh.unlock(key, k) }
}

// tryLock takes key only if it is free now. Background loops use it, so
// that a transaction in flight on one key never stalls their pass over
// every other key; the busy key is looked at on the next pass.
func (l *keyLocks) tryLock(key string) (unlock func(), ok bool) {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	k := sh.m[key]
	if k == nil {
		k = &keyLock{}
		sh.m[key] = k
	} else if !k.mu.TryLock() {
		return nil, false
	} else {
		k.refs++
		return func() { sh.unlock(key, k) }, true
	}
	k.mu.Lock()
	k.refs++
	return func() { sh.unlock(key, k) }, true
}

func (sh *keyLockShard) unlock(key string, k *keyLock) {
	k.mu.Unlock()
	sh.mu.Lock()
	if k.refs--; k.refs == 0 {
		delete(sh.m, key)
	}
	sh.mu.Unlock()
}
