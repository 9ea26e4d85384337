package sim

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// row is one live sandbox. sb.Token is the sandbox's release credential.
type row struct {
	sb        pool.Sandbox
	ownerAddr string
}

type warmPool struct{ target, ready, refilling int }

// index is the node's state: live sandboxes, warm pools and the address
// range. They live under one mutex because a claim changes all three at
// once (takes a warm VM, an address, adds a row); nothing else shares it.
type index struct {
	mu   sync.Mutex
	rows map[string]*row
	// pools gets no key after newIndex, so looking a key up needs no lock;
	// the *warmPool counts it points to are under mu.
	pools   map[pool.Key]*warmPool
	addrs   addrRange
	used    map[string]struct{} // owner addresses of live rows
	pending int                 // admitted claims still booting; they count against MaxClaims
	dirty   bool
	// soonest is a lower bound on every row's deadline (zero: no bound
	// yet), so the reaper does not scan every row on every tick while no
	// lease can be due. put and setDeadline lower it; only reap raises it.
	soonest time.Time
	timers  map[*time.Timer]struct{} // warm refills in flight
	closed  bool
	refill  time.Duration
}

func newIndex(pools map[pool.Key]int, prefix string, refill time.Duration) (*index, error) {
	ar, err := newAddrRange(prefix)
	if err != nil {
		return nil, err
	}
	ix := &index{
		rows:   map[string]*row{},
		pools:  map[pool.Key]*warmPool{},
		addrs:  ar,
		used:   map[string]struct{}{},
		timers: map[*time.Timer]struct{}{},
		refill: refill,
	}
	for k, n := range pools {
		ix.pools[k] = &warmPool{target: n, ready: n}
	}
	return ix, nil
}

func (ix *index) known(k pool.Key) bool {
	_, ok := ix.pools[k] // keys are fixed: no lock (see pools)
	return ok
}

// full reports whether max live-or-booting sandboxes exist (max 0 = never).
func (ix *index) full(max int) bool {
	if max <= 0 {
		return false
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return len(ix.rows)+ix.pending >= max
}

// admit reserves a slot under max and takes a warm VM if there is one.
// Every admit is followed by exactly one insert.
func (ix *index) admit(k pool.Key, max int) (admitted, warm bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if max > 0 && len(ix.rows)+ix.pending >= max {
		return false, false
	}
	ix.pending++
	p := ix.pools[k]
	if p == nil || p.ready == 0 {
		return true, false
	}
	if ix.refill <= 0 {
		return true, true // refills instantly: ready never drops
	}
	p.ready--
	p.refilling++
	var t *time.Timer
	// The callback takes ix.mu, which is held until t is recorded below.
	t = time.AfterFunc(ix.refill, func() {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		delete(ix.timers, t)
		if !ix.closed {
			p.ready++
			p.refilling--
		}
	})
	ix.timers[t] = struct{}{}
	return true, true
}

// insert turns an admitted claim into a live row.
func (ix *index) insert(k pool.Key, deadline time.Time, claimRef string) (row, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.pending--
	addr, err := ix.addrs.next(func(a string) bool { _, ok := ix.used[a]; return ok })
	if err != nil {
		return row{}, err
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	r := &row{
		sb: pool.Sandbox{
			ID: "sb_" + randHex(8), Key: k, Deadline: deadline,
			ClaimedAt: &now, ClaimRef: claimRef, Token: randHex(16),
		},
		ownerAddr: addr,
	}
	for ix.rows[r.sb.ID] != nil { // 64 random bits; belt and braces
		r.sb.ID = "sb_" + randHex(8)
	}
	ix.put(r)
	return *r, nil
}

// put and drop keep rows and used in step. Callers hold ix.mu.
func (ix *index) put(r *row) {
	ix.rows[r.sb.ID] = r
	ix.used[r.ownerAddr] = struct{}{}
	ix.dirty = true
	ix.lowerSoonest(r.sb.Deadline)
}

func (ix *index) lowerSoonest(t time.Time) {
	if ix.soonest.IsZero() || t.Before(ix.soonest) {
		ix.soonest = t
	}
}

func (ix *index) drop(id string) {
	if r := ix.rows[id]; r != nil {
		delete(ix.used, r.ownerAddr)
		delete(ix.rows, id)
		ix.dirty = true
	}
}

// releaseResult is what a release attempt found.
type releaseResult int

const (
	released releaseResult = iota
	notFound
	forbidden
)

// release removes id if authorized(its token) says so.
func (ix *index) release(id string, authorized func(sandboxToken string) bool) releaseResult {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	r := ix.rows[id]
	if r == nil {
		return notFound
	}
	if !authorized(r.sb.Token) {
		return forbidden
	}
	ix.drop(id)
	return released
}

// list returns rows without tokens, oldest claim first.
func (ix *index) list(claimRef string) []pool.Sandbox {
	ix.mu.Lock()
	out := make([]pool.Sandbox, 0, len(ix.rows))
	for _, r := range ix.rows {
		if claimRef == "" || r.sb.ClaimRef == claimRef {
			sb := r.sb
			sb.Token = ""
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
	return *r, true
}

// reap drops every row whose deadline is not after now.
func (ix *index) reap(now time.Time) []string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if len(ix.rows) == 0 || now.Before(ix.soonest) {
		return nil
	}
	var gone []string
	var soonest time.Time
	for id, r := range ix.rows {
		switch d := r.sb.Deadline; {
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

func (ix *index) remove(id string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.drop(id)
}

func (ix *index) info() ([]pool.PoolInfo, int) {
	ix.mu.Lock()
	out := make([]pool.PoolInfo, 0, len(ix.pools))
	for k, p := range ix.pools {
		out = append(out, pool.PoolInfo{Key: k, Warm: p.ready, Refilling: p.refilling, Target: p.target})
	}
	n := len(ix.rows)
	ix.mu.Unlock()
	slices.SortFunc(out, func(a, b pool.PoolInfo) int {
		return cmp.Or(strings.Compare(a.Key.Template, b.Key.Template),
			strings.Compare(a.Key.Net, b.Key.Net), strings.Compare(a.Key.Size, b.Key.Size))
	})
	return out, n
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

// addrRange hands out owner_addr values: the prefix's octets, then the
// remaining ones counted from 1 to 254 each, skipping addresses in use.
type addrRange struct {
	prefix string
	free   int // octets to fill
	seq    uint64
}

func newAddrRange(prefix string) (addrRange, error) {
	if !strings.HasSuffix(prefix, ".") {
		prefix += "."
	}
	free := 4 - strings.Count(prefix, ".")
	if free < 1 || free > 3 {
		return addrRange{}, fmt.Errorf("sim: address prefix %q: want 1 to 3 leading octets", prefix)
	}
	return addrRange{prefix: prefix, free: free}, nil
}

func (a *addrRange) size() uint64 {
	n := uint64(1)
	for range a.free {
		n *= 254
	}
	return n
}

func (a *addrRange) next(inUse func(string) bool) (string, error) {
	for range a.size() {
		n := a.seq % a.size()
		a.seq++
		octets := make([]string, a.free)
		for i := a.free - 1; i >= 0; i-- {
			octets[i] = strconv.FormatUint(n%254+1, 10)
			n /= 254
		}
		addr := a.prefix + strings.Join(octets, ".") + ":" + ownerPort
		if !inUse(addr) {
			return addr, nil
		}
	}
	return "", fmt.Errorf("owner address range %s* exhausted", a.prefix)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
