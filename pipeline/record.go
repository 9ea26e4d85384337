package pipeline

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// record is what memory holds about one pod key: its key lock and its
// keyState. The store holds the key's durable row and is the authority
// over it; the record says what the store cannot.
type record struct {
	// lock is the key lock. It serialises every transaction on the key,
	// across Pod generations (UIDs), deletes and background passes.
	lock sync.Mutex
	refs int // holders and waiters of lock
	keyState
}

// keyState holds the states and marks the package doc draws, for one key.
// Every change to it is in transitions.go.
type keyState struct {
	// current is the newest Pod UID that Create saw for the key, until a
	// Delete of that UID ends it. Only the current, undeleted generation
	// acts on the key's claim (see live).
	current string
	// tentative is a claim sandboxd answered whose commit is not
	// acknowledged yet. It is kept after a failed rollback release, so
	// that a later delete can still reach the VM: no release credential
	// is ever dropped. Set when hasTentative.
	tentative    store.Claim
	hasTentative bool
	// quarantined: the row was loaded from the state file, and no sandboxd
	// listing has vouched for it yet.
	quarantined bool
	// unsettled: the key's last claim attempt may have made a VM whose
	// answer was lost. The key's next transaction looks the claim up by
	// claim_ref before it claims, so no second VM leaks.
	unsettled bool
	// detached is the claim ID the key holds for a Pod that is gone (a
	// delete preserved it, or its release failed). Its recorded owner is
	// asked again periodically (Engine.reauthorize); a Pod that takes the
	// claim over attaches it again.
	detached string
	// lifetime is the ttl-seconds the key's current Pod asked for, known
	// (hasLifetime) once its transaction published Running. Memory only:
	// after a restart it is known again when virtual-kubelet hands the
	// Pod back.
	lifetime    int64
	hasLifetime bool
	// lease spaces the lease watch's looks at a key whose last look
	// decided nothing (leaseRetries).
	lease *leaseRetry
}

// idle: the record says nothing, and nobody holds or awaits its lock.
func (r *record) idle() bool {
	return r.refs == 0 && r.keyState == keyState{}
}

// records holds one record per pod key that has state, or a lock holder
// or waiter: memory is O(keys in use). It is split in shards so that the
// claim path does not meet on one mutex. Deleted Pod generations (UIDs)
// are remembered beside it, per UID (dead, see tombstoneTTL).
//
// Lock rule (its one statement; docs link here): a record's keyState is
// read and written only by the methods in transitions.go, under its
// shard's mu, which is never held across IO or a call out of those
// methods. The key lock orders transactions: the key's row, tentative
// claim, quarantine, detached mark and lifetime change only while it is
// held, so a transaction that holds it sees them change by its own hand
// only. Three marks may change without it, each only toward more caution:
// Create and Delete move current and the tombstones (a transaction checks
// live under the key lock), the startup listing marks a key unsettled,
// and a failed lease listing delays the key's next look.
//
// Lock order (its one statement): a key's lock (record.lock) is outermost
// and held across IO. Under it idMu, which holdTentative holds while it
// takes, each in turn and never together, the store's mu (Store.Holder)
// and a record shard's mu (update). A record shard's mu and a workqueue
// shard's mu (shard.mu) are innermost: nothing is locked while one is
// held, except tryLock's TryLock of a key lock, which never waits; lock
// takes a key lock only after it has released the shard's mu.
type records struct {
	st     Store
	seed   maphash.Seed
	shards [64]recordShard
	dead   *cache.LRUExpireCache // deleted UID → struct{}; synchronous and exact

	// ids finds the key of a tentative claim by its sandbox id, as the
	// store's Holder does for rows. idMu guards it, and makes holdTentative's
	// check and insert one step.
	idMu sync.Mutex
	ids  map[string]PodKey

	quarantined atomic.Int64 // records with quarantined set
}

type recordShard struct {
	mu sync.Mutex
	m  map[PodKey]*record
}

// newRecords remembers up to tombstones deleted generations, each for
// tombstoneTTL of clock's time (Config.Clock, Config.Tombstones).
func newRecords(st Store, clock cache.Clock, tombstones int) *records {
	rs := &records{st: st, seed: maphash.MakeSeed(), ids: map[string]PodKey{},
		dead: cache.NewLRUExpireCacheWithClock(tombstones, clock)}
	for i := range rs.shards {
		rs.shards[i].m = map[PodKey]*record{}
	}
	return rs
}

func (rs *records) shard(key PodKey) *recordShard {
	return &rs.shards[maphash.String(rs.seed, string(key))%uint64(len(rs.shards))]
}

// update runs fn on key's state under its shard's mu, making the record if
// fn needs one and dropping it once it is idle.
func (rs *records) update(key PodKey, fn func(s *keyState)) {
	sh := rs.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r := sh.m[key]
	if r == nil {
		r = &record{}
		fn(&r.keyState)
		if !r.idle() {
			sh.m[key] = r
		}
		return
	}
	fn(&r.keyState)
	if r.idle() {
		delete(sh.m, key)
	}
}

// state is a copy of key's state (zero for a key without a record).
func (rs *records) state(key PodKey) keyState {
	sh := rs.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r := sh.m[key]; r != nil {
		return r.keyState
	}
	return keyState{}
}

// each visits every record's state, one shard at a time; fn must not call
// back into records.
func (rs *records) each(fn func(key PodKey, s *keyState)) {
	for i := range rs.shards {
		sh := &rs.shards[i]
		sh.mu.Lock()
		for key, r := range sh.m {
			fn(key, &r.keyState)
			if r.idle() {
				delete(sh.m, key)
			}
		}
		sh.mu.Unlock()
	}
}

// held is key's record, made if it has none, for a lock holder or waiter;
// the caller holds sh.mu.
func (sh *recordShard) held(key PodKey) *record {
	r := sh.m[key]
	if r == nil {
		r = &record{}
		sh.m[key] = r
	}
	return r
}

// lock blocks until key is free, and returns its unlock.
func (rs *records) lock(key PodKey) func() {
	sh := rs.shard(key)
	sh.mu.Lock()
	r := sh.held(key)
	r.refs++
	sh.mu.Unlock()
	r.lock.Lock()
	return func() { sh.unlock(key, r) }
}

// tryLock takes key only if it is free now. Background loops use it, so
// that a transaction in flight on one key never stalls their pass over
// every other key; the busy key is looked at on the next pass.
func (rs *records) tryLock(key PodKey) (unlock func(), ok bool) {
	sh := rs.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r := sh.held(key)
	if !r.lock.TryLock() {
		return nil, false
	}
	r.refs++
	return func() { sh.unlock(key, r) }, true
}

func (sh *recordShard) unlock(key PodKey, r *record) {
	r.lock.Unlock()
	sh.mu.Lock()
	if r.refs--; r.idle() {
		delete(sh.m, key)
	}
	sh.mu.Unlock()
}
