package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// Config configures an Engine. Zero values take the documented defaults.
type Config struct {
	Shards  int // default 8
	Workers int // per shard, default 32
	// QueueDepth is how many UIDs may hold an intent per shard; default
	// 1024. Give every shard room for every Pod the node admits
	// (--node-pods): then no Pod is ever deferred (see Create).
	QueueDepth int

	// Node is this virtual node's name. It goes into every claim's
	// claim_ref and labels (see Identity). Default "vk-sandboxd".
	Node string
	// NodeKey is the node's secret (pool/store.NodeKey), at least
	// minNodeKey bytes: it marks every claim this node makes, and a VM
	// that no row holds is this node's only with its mark (see Identity).
	// Required; it must stay the same for as long as the state file does.
	NodeKey []byte

	Sandboxd Sandboxd
	Store    Store
	Reporter Reporter
	// Owners asks a claim's recorded owner for a verdict (a replaced
	// owner's claim, a detached row). Nil: only a bare Pod's row may be
	// released that way; every owned row is preserved.
	Owners   OwnerAuthority
	Observer Observer // optional
	Logger   *slog.Logger

	// ClaimRetry bounds retries of one claim inside a transaction
	// (transport errors, 5xx, undecodable answers); zero fields take
	// defaultClaimRetry's.
	ClaimRetry pool.RetryPolicy
	// RequeueMin/RequeueMax bound the slow retry of a Pod that could not be
	// claimed (capacity miss, 4xx, exhausted retries, state write failure):
	// per-UID exponential from Min up to Max. Defaults 1s and 30s.
	RequeueMin, RequeueMax time.Duration
	// ReleaseTimeout bounds a rollback release, which runs on a detached
	// context so a cancelled caller cannot strand a VM. Default 10s.
	ReleaseTimeout time.Duration
	// VerifyInterval caps the wait between quarantine verification tries.
	// Default 2s.
	VerifyInterval time.Duration
	// SettleWindow is how long a VM this node made may stay undelivered
	// before the orphan scan releases it: longer than the worst time a
	// claim takes to finish at sandboxd after its caller gave up (one claim
	// attempt's deadline), so that the key's next lookup can still recover
	// it. Default 2m.
	SettleWindow time.Duration
	// Clock is every time the engine reads: the background loops' ticks,
	// the lease watch's now, a claim's ClaimedAt, the settle window, the
	// startup verification's warn interval and the tombstones. Default: the
	// real clock; tests pass a fake one and step it. Latencies measured for
	// metrics and spans (claim latency, lookup and loop pass timings) stay
	// on the real clock, and so do the waits the engine only sleeps through
	// (retry backoffs, the workqueue's rate limiter, a deferred intent).
	Clock clock.WithTicker
	// Tombstones bounds how many deleted Pod generations are remembered
	// (each for 10 minutes, about 200 bytes). Default 65,536.
	Tombstones int

	// The engine's background loops, which Run starts and joins: each
	// runs every interval of Clock, and 0 leaves it off. Each reports the
	// end of every pass to Observer.LoopPass.
	// LeaseCheckInterval: watchLeases. ReauthorizeInterval: reauthorize.
	// OrphanScanInterval: watchOrphans, reporting to OrphanObserver.
	LeaseCheckInterval, ReauthorizeInterval, OrphanScanInterval time.Duration
	OrphanObserver                                              OrphanObserver
}

// DefaultConfig is the values Config's zero fields take: the one place the
// library's defaults are set, and the source of vk-sandbox's matching flag
// defaults. One value differs in the binary: --queue-depth defaults to
// --node-pods (cmd/vk-sandbox/config.go, settle; docs/configuration.md),
// because every shard must have room for every Pod the node admits.
// A function, not a variable, so that no caller can change the defaults of
// every other one.
func DefaultConfig() Config {
	return Config{
		Node: "vk-sandboxd", Shards: 8, Workers: 32, QueueDepth: 1024,
		RequeueMin: time.Second, RequeueMax: 30 * time.Second, ReleaseTimeout: 10 * time.Second,
		VerifyInterval: 2 * time.Second, SettleWindow: 2 * time.Minute, ClaimRetry: defaultClaimRetry,
		Tombstones: 1 << 16,
	}
}

func (c *Config) defaults() error {
	if c.Sandboxd == nil || c.Store == nil || c.Reporter == nil {
		return errors.New("pipeline: Sandboxd, Store and Reporter are required")
	}
	if len(c.NodeKey) < minNodeKey {
		return fmt.Errorf("pipeline: NodeKey is required (at least %d bytes, got %d)", minNodeKey, len(c.NodeKey))
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	d := DefaultConfig()
	if c.Node == "" {
		c.Node = d.Node
	}
	def(&c.Shards, d.Shards)
	def(&c.Workers, d.Workers)
	def(&c.QueueDepth, d.QueueDepth)
	def(&c.Tombstones, d.Tombstones)
	defd(&c.RequeueMin, d.RequeueMin)
	defd(&c.RequeueMax, d.RequeueMax)
	defd(&c.ReleaseTimeout, d.ReleaseTimeout)
	defd(&c.VerifyInterval, d.VerifyInterval)
	defd(&c.SettleWindow, d.SettleWindow)
	c.ClaimRetry = c.ClaimRetry.Or(d.ClaimRetry)
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Owners == nil {
		c.Owners = bareOnly
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.OrphanScanInterval > 0 && c.OrphanObserver == nil {
		return errors.New("pipeline: OrphanScanInterval needs an OrphanObserver")
	}
	return nil
}

// bareOnly is the OwnerAuthority without a way to ask an owner: a bare
// Pod's row (known to have no owner) may go, nothing else.
func bareOnly(_ context.Context, _ PodKey, c ClaimView) Verdict {
	if c.OwnerKnown() && c.OwnerUID == "" && c.Owner == "" {
		return Verdict{Release: true, Reason: "bare-pod"}
	}
	return Verdict{Reason: "no-owner-authority"}
}
