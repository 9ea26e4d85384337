package pipeline_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// full selects the full size of the reliability suites (make
// test-reliability); otherwise they run at CI size.
func full() bool { return os.Getenv("VK_RELIABILITY") == "full" }

// noLeaks registers, as the test's first cleanup (so it runs last, after
// every engine, store and server the test started has stopped), a check
// that no goroutine outlives the test.
func noLeaks(t *testing.T) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

// countingSandboxd counts what the engine asks of sandboxd, including calls
// that never reach it (the emulator cannot count a refused connection).
//
// It also watches the rule that keeps a lost claim response from doubling
// a VM: a claim is never sent for a claim_ref whose lookup is owed and has
// not succeeded. A lookup of a claim_ref is its List plus the Get of every
// VM that List returned; once one of them fails, the claim_ref stays owed
// until a later lookup succeeds. Before any whole listing (the startup
// listing) has succeeded, every claim_ref is owed a lookup. Claims that
// break the rule are kept in blind. Only claim_ref lookups and whole
// listings are told apart, so blindClaims is meant for engines that run no
// lease watch and no orphan scan (their whole listings and Gets are no
// startup listing and no lookup).
type countingSandboxd struct {
	pipeline.Sandboxd
	claims, lists, gets, releases atomic.Int64

	mu         sync.Mutex
	claimTimes []time.Time
	lookup     map[string]bool   // claim_ref → whether its latest lookup succeeded
	refOf      map[string]string // sandbox id → the claim_ref whose lookup listed it
	listedAll  bool              // a whole listing has succeeded
	blind      []string          // claims sent while their claim_ref was owed a lookup
}

func (c *countingSandboxd) Claim(ctx context.Context, r pool.ClaimRequest) (pool.ClaimResponse, error) {
	c.claims.Add(1)
	c.mu.Lock()
	c.claimTimes = append(c.claimTimes, time.Now())
	switch ok, looked := c.lookup[r.ClaimRef]; {
	case looked && !ok:
		c.blind = append(c.blind, r.ClaimRef+": its latest lookup failed")
	case !looked && !c.listedAll:
		c.blind = append(c.blind, r.ClaimRef+": never looked up, and no startup listing has succeeded")
	}
	c.mu.Unlock()
	return c.Sandboxd.Claim(ctx, r)
}

func (c *countingSandboxd) List(ctx context.Context, o pool.ListOptions) ([]pool.Sandbox, error) {
	c.lists.Add(1)
	rows, err := c.Sandboxd.List(ctx, o)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case o.ClaimRef != "":
		if c.lookup == nil {
			c.lookup, c.refOf = map[string]bool{}, map[string]string{}
		}
		c.lookup[o.ClaimRef] = err == nil
		for _, r := range rows {
			c.refOf[r.ID] = o.ClaimRef
		}
	case err == nil:
		c.listedAll = true
	}
	return rows, err
}

func (c *countingSandboxd) Get(ctx context.Context, id string) (pool.Sandbox, error) {
	c.gets.Add(1)
	sb, err := c.Sandboxd.Get(ctx, id)
	// A tenant token is forbidden to read credentials: the lookup still
	// answered (the VM exists and cannot be recovered).
	if err != nil && !errors.Is(err, pool.ErrForbidden) {
		c.mu.Lock()
		if ref, ok := c.refOf[id]; ok {
			c.lookup[ref] = false
		}
		c.mu.Unlock()
	}
	return sb, err
}

// lookupFailed reports whether the latest lookup of claimRef failed.
func (c *countingSandboxd) lookupFailed(claimRef string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok, looked := c.lookup[claimRef]
	return looked && !ok
}

// blindClaims are the claims sent while their claim_ref was owed a lookup.
func (c *countingSandboxd) blindClaims() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.blind...)
}

func (c *countingSandboxd) Release(ctx context.Context, id, tok string) error {
	c.releases.Add(1)
	return c.Sandboxd.Release(ctx, id, tok)
}

func (c *countingSandboxd) times() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.claimTimes...)
}

// liveFor is the emulator's live index: the VMs the test engine made for a
// Pod key (by the mark alone: some tests claim with a tenant token).
func liveFor(s *sim.Server, key pipeline.PodKey) []pool.Sandbox {
	var out []pool.Sandbox
	for _, sb := range s.Sandboxes() {
		if k, _, ok := testID.Owns(sb, false); ok && k == key {
			out = append(out, sb)
		}
	}
	return out
}
