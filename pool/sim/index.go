package sim

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// row is one sandbox. sb.Token is the sandbox's release credential;
// ownerAddr is only set in per-claim mode (elsewhere the node has one).
// guest is not saved in the state file: a restarted emulator's guests
// start afresh (reachable, memory not set).
type row struct {
	sb        pool.Sandbox
	ownerAddr string
	guest     guest // the emulated guest: see guest.go
}

type warmPool struct{ target, ready, refilling int }

// index is the node's state: sandboxes, warm pools, slot accounting and the
// per-claim addresses. They live under one mutex because a claim changes
// them together (takes a warm VM and a slot, then adds a row).
type index struct {
	mu   sync.Mutex
	rows map[string]*row
	// pools gets no key after newIndex, so looking a key up needs no lock;
	// the *warmPool counts it points to are under mu.
	pools map[pool.Key]*warmPool
	// Slots: an admitted claim holds one (pending) from admission until its
	// row exists, and a row holds one until it is released, reaped or
	// archived, so that claims still booting count against the caps.
	pending  int
	active   int            // rows not archived
	byTenant map[string]int // pending + active per tenant ("" is root)

	perClaim bool
	addrs    addrRange
	used     map[string]struct{} // per-claim owner addresses of live rows

	dirty bool
	// soonest is a lower bound on every reapable row's deadline (zero: no
	// bound yet), so the reaper does not scan every row on every tick while
	// no lease can be due. put and setDeadline lower it; only reap raises it.
	soonest time.Time
	timers  map[*time.Timer]struct{} // warm refills in flight
	closed  bool
	refill  time.Duration
}

func newIndex(pools map[pool.Key]int, ar addrRange, perClaim bool, refill time.Duration) *index {
	ix := &index{
		rows:     map[string]*row{},
		pools:    map[pool.Key]*warmPool{},
		byTenant: map[string]int{},
		perClaim: perClaim,
		addrs:    ar,
		used:     map[string]struct{}{},
		timers:   map[*time.Timer]struct{}{},
		refill:   refill,
	}
	for k, n := range pools {
		ix.pools[k] = &warmPool{target: n, ready: n}
	}
	return ix
}

func (ix *index) known(k pool.Key) bool {
	_, ok := ix.pools[k] // keys are fixed: no lock (see pools)
	return ok
}

// claimed is what a finished claim puts in its row.
type claimed struct {
	key      pool.Key
	tenant   string
	claimRef string
	metadata map[string]string
	deadline time.Time
}

// insert turns an admitted claim into a row: only now does it show in the
// index.
func (ix *index) insert(c claimed) (row, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.unreserve(c.tenant)
	r := &row{}
	if ix.perClaim {
		addr, err := ix.addrs.next(func(a string) bool { _, ok := ix.used[a]; return ok })
		if err != nil {
			return row{}, err
		}
		r.ownerAddr = addr
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	cpus, mem := sizeOf(c.key.Size)
	r.sb = pool.Sandbox{
		ID: "sb_" + randHex(8), Key: c.key, Tenant: c.tenant, Deadline: c.deadline,
		ClaimedAt: &now, ClaimRef: c.claimRef, Metadata: maps.Clone(c.metadata),
		CPUCount: cpus, MemTotalBytes: mem, Token: randHex(16),
	}
	for ix.rows[r.sb.ID] != nil { // 64 random bits; belt and braces
		r.sb.ID = "sb_" + randHex(8)
	}
	ix.put(r)
	return *r, nil
}

// cancel gives back the slot of an admitted claim whose VM will not be
// made: its caller went away while it was provisioning.
func (ix *index) cancel(tenant string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.unreserve(tenant)
}

// unreserve gives back a pending slot; untrack one of tenant's slots.
// Callers hold ix.mu.
func (ix *index) unreserve(tenant string) {
	ix.pending--
	ix.untrack(tenant)
}

func (ix *index) untrack(tenant string) {
	if ix.byTenant[tenant]--; ix.byTenant[tenant] <= 0 {
		delete(ix.byTenant, tenant)
	}
}

// put and drop keep rows, slots and used in step. Callers hold ix.mu.
func (ix *index) put(r *row) {
	ix.rows[r.sb.ID] = r
	if r.ownerAddr != "" {
		ix.used[r.ownerAddr] = struct{}{}
	}
	if !r.sb.Archived {
		ix.active++
		ix.byTenant[r.sb.Tenant]++
		ix.lowerSoonest(r.sb.Deadline)
	}
	ix.dirty = true
}

func (ix *index) drop(id string) {
	r := ix.rows[id]
	if r == nil {
		return
	}
	if !r.sb.Archived {
		ix.active--
		ix.untrack(r.sb.Tenant)
	}
	delete(ix.used, r.ownerAddr)
	delete(ix.rows, id)
	ix.dirty = true
}

func (ix *index) lowerSoonest(t time.Time) {
	if ix.soonest.IsZero() || t.Before(ix.soonest) {
		ix.soonest = t
	}
}

// release removes id if authorized(its token) says so; false means no such
// sandbox for this caller, whether the id or the token was wrong.
func (ix *index) release(id string, authorized func(sandboxToken string) bool) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	r := ix.rows[id]
	if r == nil || !authorized(r.sb.Token) {
		return false
	}
	ix.drop(id)
	return true
}

// renew sets id's deadline if authorized(its token) and then gate(its row)
// allow it. gate's refusal is returned as is; a wrong id or token is
// errNotFound.
func (ix *index) renew(id string, authorized func(string) bool, gate func(pool.Sandbox) *httpError, deadline time.Time) *httpError {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	r := ix.rows[id]
	if r == nil || !authorized(r.sb.Token) {
		return errNotFound(id)
	}
	if err := gate(r.sb); err != nil {
		return err
	}
	r.sb.Deadline = deadline
	ix.lowerSoonest(deadline)
	ix.dirty = true
	return nil
}

// list returns the rows keep accepts, without tokens, oldest claim first.
func (ix *index) list(keep func(*pool.Sandbox) bool) []pool.Sandbox {
	ix.mu.Lock()
	out := make([]pool.Sandbox, 0, len(ix.rows))
	for _, r := range ix.rows {
		if keep == nil || keep(&r.sb) {
			sb := r.sb
			sb.Token = ""
			sb.Metadata = maps.Clone(sb.Metadata)
			out = append(out, sb)
		}
	}
	ix.mu.Unlock()
	slices.SortFunc(out, func(a, b pool.Sandbox) int {
		return cmp.Or(a.ClaimedAt.Compare(*b.ClaimedAt), strings.Compare(a.ID, b.ID))
	})
	return out
}

func (ix *index) get(id string) (row, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	r := ix.rows[id]
	if r == nil {
		return row{}, false
	}
	out := *r
	out.sb.Metadata = maps.Clone(r.sb.Metadata)
	return out, true
}

// reap drops every row, archived ones aside, whose deadline is not after
// now.
func (ix *index) reap(now time.Time) []string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.active == 0 || now.Before(ix.soonest) {
		return nil
	}
	var gone []string
	var soonest time.Time
	for id, r := range ix.rows {
		switch d := r.sb.Deadline; {
		case r.sb.Archived:
		case !d.After(now):
			ix.drop(id)
			gone = append(gone, id)
		case soonest.IsZero() || d.Before(soonest):
			soonest = d
		}
	}
	ix.soonest = soonest
	return gone
}

func (ix *index) setDeadline(id string, t time.Time) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if r := ix.rows[id]; r != nil {
		r.sb.Deadline = t.UTC()
		ix.dirty = true
		ix.lowerSoonest(r.sb.Deadline)
	}
}

// archive marks id archived: it gives up its slot, is never reaped, and a
// renew of it is a conflict.
func (ix *index) archive(id string) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	r := ix.rows[id]
	if r == nil || r.sb.Archived {
		return r != nil
	}
	ix.drop(id)
	r.sb.Archived = true
	ix.put(r)
	return true
}

func (ix *index) remove(id string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.drop(id)
}

// nodeStats is the index's part of /v1/info and /metrics.
type nodeStats struct {
	pools              []pool.PoolInfo
	claimed, archived  int
	pending            int
	claimedPlusPending int
}

func (ix *index) stats() nodeStats {
	ix.mu.Lock()
	st := nodeStats{pools: make([]pool.PoolInfo, 0, len(ix.pools)), claimed: ix.active,
		archived: len(ix.rows) - ix.active, pending: ix.pending, claimedPlusPending: ix.active + ix.pending}
	for k, p := range ix.pools {
		st.pools = append(st.pools, pool.PoolInfo{Key: k, Warm: p.ready, Refilling: p.refilling, Target: p.target})
	}
	ix.mu.Unlock()
	slices.SortFunc(st.pools, func(a, b pool.PoolInfo) int {
		return cmp.Or(strings.Compare(a.Key.Template, b.Key.Template),
			strings.Compare(a.Key.Net, b.Key.Net), strings.Compare(a.Key.Size, b.Key.Size))
	})
	return st
}

// close stops the refill timers; a stopped refill leaves its pool short,
// which no longer matters.
func (ix *index) close() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.closed = true
	for t := range ix.timers {
		t.Stop()
	}
	clear(ix.timers)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
