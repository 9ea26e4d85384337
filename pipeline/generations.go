package pipeline

import (
	"sync"
	"time"

	"github.com/dgraph-io/ristretto/v2"
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
//     yet), so a create is the newer word. Tombstones live in a bounded
//     cache with a TTL; if one is evicted early the current-UID check still
//     stops the old generation.
type generations struct {
	mu      sync.Mutex
	current map[string]string // key → newest UID seen by Create, until it is deleted

	dead *ristretto.Cache[string, struct{}]
	ttl  time.Duration
}

const (
	tombstoneTTL  = 10 * time.Minute
	maxTombstones = 1 << 16
)

func newGenerations() (*generations, error) {
	dead, err := ristretto.NewCache(&ristretto.Config[string, struct{}]{
		NumCounters: 10 * maxTombstones, MaxCost: maxTombstones, BufferItems: 64,
	})
	if err != nil {
		return nil, err
	}
	return &generations{current: map[string]string{}, dead: dead, ttl: tombstoneTTL}, nil
}

// born records uid as key's current generation, lifting a tombstone it
// may have, and returns the UID it replaced ("" for none).
func (g *generations) born(key, uid string) (replaced string) {
	if g.deleted(uid) {
		g.dead.Del(uid)
		g.dead.Wait()
	}
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
	// Visible to every reader once Wait returns: ristretto buffers sets.
	g.dead.SetWithTTL(uid, struct{}{}, 1, g.ttl)
	g.dead.Wait()
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

func (g *generations) close() { g.dead.Close() }
