package sim

import (
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// limits are what admission checks, read once per claim from the knobs.
type limits struct {
	maxClaims, tenantMax int
	// redirectOnMiss: a meshed node sends a warm miss to a peer instead of
	// booting it.
	redirectOnMiss bool
}

type admission int

const (
	admitWarm admission = iota
	admitCold
	tenantFull
	nodeFull
	warmMiss
)

// admit decides a claim for k by tenant; with take it also reserves the slot
// and the warm VM. Every admit with take that admits is followed by exactly
// one insert.
func (ix *index) admit(k pool.Key, tenant string, lim limits, take bool) admission {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if tenant != "" && lim.tenantMax > 0 && ix.byTenant[tenant] >= lim.tenantMax {
		return tenantFull
	}
	if lim.maxClaims > 0 && ix.active+ix.pending >= lim.maxClaims {
		return nodeFull
	}
	p := ix.pools[k] // nil for a peer's template: always cold
	warm := p != nil && p.ready > 0
	if !warm && lim.redirectOnMiss {
		return warmMiss
	}
	res := admitCold
	if warm {
		res = admitWarm
	}
	if !take {
		return res
	}
	ix.pending++
	ix.byTenant[tenant]++
	if warm && ix.refill > 0 { // with no delay a pool refills at once: ready never drops
		ix.takeWarm(p)
	}
	return res
}

// takeWarm moves one VM of p from ready to refilling. Callers hold ix.mu.
func (ix *index) takeWarm(p *warmPool) {
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
}

// sizeOf is the emulator's machine shape per size axis.
func sizeOf(size string) (cpus int, mem int64) {
	switch size {
	case "medium":
		return 2, 2 << 30
	case "large":
		return 4, 8 << 30
	}
	return 1, 1 << 30
}
