package pipeline

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
)

// generations knows which Pod generation (UID) is current for each key,
// and which UIDs were deleted. It is what keeps an old generation's work
// from touching its replacement's claim:
//   - virtual-kubelet queues work by namespace/name, and may force-delete a
//     Pending Pod without calling DeletePod. When the same-name replacement
//     arrives, the old UID's intent is cancelled (Engine.Create), and a
//     transaction that still runs for it finds, under the key lock, that its
//     UID is no longer current, and stops;
//   - a delete leaves a tombstone for its UID. A transaction that took its
//     intent just before the delete finds it, under the key lock, and does
//     nothing. A create for the UID lifts the tombstone: virtual-kubelet
//     creates only Pods its informer shows alive and not terminating, and
//     it can call DeletePod for a Pod that still lives (its sync deletes
//     whatever the provider holds for a key its informer does not show
//     yet), so a create is the newer word.
//
// Tombstones are a safety rule, so their store is synchronous and exact: a
// tombstone set is readable at once, and one is dropped only when it is
// older than tombstoneTTL or when its bound of newer ones followed it
// (least recently set first): Config.Tombstones. The current-UID check still stops an old
// generation whose tombstone went.
type generations struct {
	mu      sync.Mutex
	current map[string]string // key → newest UID seen by Create, until it is deleted

	dead *cache.LRUExpireCache // UID → struct{}
	ttl  time.Duration
}

const tombstoneTTL = 10 * time.Minute

// newGenerations remembers up to bound tombstones (Config.Tombstones).
func newGenerations(clock cache.Clock, bound int) *generations {
	return &generations{current: map[string]string{}, dead: cache.NewLRUExpireCacheWithClock(bound, clock), ttl: tombstoneTTL}
}

// born records uid as key's current generation, lifting a tombstone it
// may have, and returns the UID it replaced ("" for none).
func (g *generations) born(key, uid string) (replaced string) {
	g.dead.Remove(uid)
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.current[key]; old != uid {
		replaced = old
	}
	g.current[key] = uid
	return replaced
}

// died tombstones uid and, if it is key's current generation, ends it.
func (g *generations) died(key, uid string) {
	g.dead.Add(uid, struct{}{}, g.ttl)
	g.mu.Lock()
	if g.current[key] == uid {
		delete(g.current, key)
	}
	g.mu.Unlock()
}

func (g *generations) deleted(uid string) bool {
	_, ok := g.dead.Get(uid)
	return ok
}

// live reports whether a transaction for uid may act on key: uid is the
// key's current generation and was not deleted. The caller holds the key
// lock, so the answer holds for the rest of its transaction, except that
// a delete may still tombstone uid; that delete then waits for the lock.
func (g *generations) live(key, uid string) bool {
	if g.deleted(uid) {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.current[key] == uid
}
