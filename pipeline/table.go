package pipeline

import (
	"hash/maphash"
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
//   - lifetime: the ttl-seconds the key's current Pod asked for, set when
//     its transaction publishes Running. Memory only: after a restart it is
//     set again when virtual-kubelet hands the Pod back.
//
// Every mutation of one key happens under that key's stripe lock (keyLocks);
// mu only guards the two overlay maps themselves.
type table struct {
	st Store

	mu          sync.RWMutex
	tentative   map[string]store.Claim
	quarantined map[string]struct{}
	unsettled   map[string]struct{}
	lifetime    map[string]int64
}

func newTable(st Store) *table {
	return &table{st: st, tentative: map[string]store.Claim{}, quarantined: map[string]struct{}{},
		unsettled: map[string]struct{}{}, lifetime: map[string]int64{}}
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
	t.mu.Unlock()
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

// keyLocks serialises work on one pod key across Pod generations (UIDs) with
// a fixed set of stripes: O(1) memory per key, no map of mutexes to reap.
type keyLocks struct {
	seed    maphash.Seed
	stripes [4096]sync.Mutex
}

func newKeyLocks() *keyLocks { return &keyLocks{seed: maphash.MakeSeed()} }

func (l *keyLocks) lock(key string) func() {
	m := &l.stripes[maphash.String(l.seed, key)%uint64(len(l.stripes))]
	m.Lock()
	return m.Unlock
}
