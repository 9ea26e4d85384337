package sim

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// setFailRate sets the share of claims answered 500, clamped to [0,1].
func (s *Server) setFailRate(f float64) {
	s.failRate.Store(math.Float64bits(min(max(f, 0), 1)))
}

// SetLoseAnswerRate sets the share of claims whose VM is made but whose
// answer is never sent (see Config.LoseAnswerRate), clamped to [0,1].
func (s *Server) SetLoseAnswerRate(f float64) {
	s.loseAnswer.Store(math.Float64bits(min(max(f, 0), 1)))
}

// SetMaxClaims caps live sandboxes; 0 is unlimited.
func (s *Server) SetMaxClaims(n int) { s.maxClaims.Store(int64(max(n, 0))) }

// setCapacity sets the answer of a node at MaxClaims: "429" or "redirect".
// Any other value panics: a typo in a test must not silently test the
// other mode.
func (s *Server) setCapacity(mode string) {
	if err := validCapacity(mode); err != nil {
		panic(err)
	}
	s.capacity.Store(&mode)
}

// SetClaimLatency sets the pre-admission latency of every claim.
func (s *Server) SetClaimLatency(d time.Duration) { s.claimLatency.Store(int64(max(d, 0))) }

// HoldNextClaim makes the next claim to arrive wait, after its latency and
// before admission, until release is called (or the server closes); later
// claims do not wait. A caller that goes away meanwhile cancels the held
// claim, unless FinishDetachedClaims is set: then it finishes, which lets a
// test order "the caller gave up and was served another VM" before "the
// first VM exists" without guessing a latency.
func (s *Server) HoldNextClaim() (release func()) { return s.HoldNextClaims(1) }

// HoldNextClaims is HoldNextClaim for the next n claims to arrive: each
// waits until release. The "claim_held" counter counts the claims that
// began such a wait, so a test can wait until n are held.
func (s *Server) HoldNextClaims(n int) (release func()) {
	h := &claimHold{ch: make(chan struct{})}
	h.left.Store(int64(n))
	s.claimHold.Store(h)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.claimHold.CompareAndSwap(h, nil)
			close(h.ch)
		})
	}
}

// claimHold is one HoldNextClaims: left is how many more claims it takes.
type claimHold struct {
	ch   chan struct{}
	left atomic.Int64
}

// setMesh turns warm-miss and peer-template redirects on or off. It leaves
// the capacity answer (setCapacity) alone.
func (s *Server) setMesh(on bool) { s.mesh.Store(on) }

// SetDraining makes every claim a 429 while on, as a node being drained.
func (s *Server) SetDraining(on bool) { s.draining.Store(on) }

// setTenantDBDown makes requests that need the tenant database answer 503
// with Retry-After while on (see Config.TenantDBDown). An API version
// without a tenant database panics: a test must not silently test a node
// that cannot fail that way.
func (s *Server) setTenantDBDown(down bool) {
	if down && !s.api.TenantAPI {
		panic("sim: setTenantDBDown: API " + s.cfg.APIVersion + " has no tenant database")
	}
	s.tenantDBDown.Store(down)
}

// addTenant adds a tenant token, as sandboxd's tenant API does. An empty
// name or token, or the root token, panics: a test must not silently run
// without the tenant it meant to add.
func (s *Server) addTenant(token, name string) {
	if err := validTenant(token, name, s.cfg.RootToken); err != nil {
		panic(err)
	}
	s.tenants.add(token, name)
}

// removeTenant removes every token of the tenant: they get 401 from then
// on, and a renew of the tenant's sandboxes 403. Its sandboxes stay until
// released or reaped. It reports whether the tenant existed.
func (s *Server) removeTenant(name string) bool { return s.tenants.remove(name) }

// OwnerAddr is the owner_addr every claim of this node carries, "" when the
// node advertises none (the none and per-claim modes).
func (s *Server) OwnerAddr() string { return s.ownerAddr }

// Sandboxes is the index, archived rows included, with tokens (test use).
func (s *Server) Sandboxes() []pool.Sandbox {
	rows := s.ix.list(nil)
	for i := range rows {
		if r, ok := s.ix.get(rows[i].ID); ok {
			rows[i].Token = r.sb.Token
		}
	}
	return rows
}

// Expire makes a sandbox vanish, as if its lease ended or the node lost it.
func (s *Server) Expire(id string) { s.ix.remove(id) }

// SetDeadline moves a sandbox's lease end; the reaper honours it.
func (s *Server) SetDeadline(id string, t time.Time) { s.ix.setDeadline(id, t) }

// archive marks a sandbox archived, as a lease that ended with
// on_expire=archive would: it stays listed, is never reaped, gives up its
// slot, and a renew of it is a 409. It reports whether the sandbox exists.
func (s *Server) archive(id string) bool { return s.ix.archive(id) }

// TraceIDs returns the W3C trace ids seen on claim requests, oldest first.
func (s *Server) TraceIDs() []string { return s.traces.snapshot() }
