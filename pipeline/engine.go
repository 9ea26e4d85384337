package pipeline

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// ErrStopping is returned for intents that arrive after shutdown began.
var ErrStopping = errors.New("pipeline: stopping, no new claims")

// errShardFull: a shard holds QueueDepth intents already.
var errShardFull = errors.New("pipeline: shard at queue depth")

const tracerName = "github.com/cocoonstack/vk-sandbox/pipeline"

// Engine runs claim transactions. Create it with New, start it with Run.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	obs    Observer
	tracer trace.Tracer
	sbx    Sandboxd
	store  Store
	rep    Reporter
	owners OwnerAuthority

	id      Identity
	lookups *lookup  // a key's VMs by claim_ref, on every sandboxd version
	keys    *records // one record per pod key: its lock and its states
	shards  []*shard
	seed    maphash.Seed
	sf      singleflight.Group

	ownerAddr atomic.Pointer[string] // the node's owner_addr, from the last claim answer
	leases    leaseRetries           // per-key backoff of the lease watch

	stopping atomic.Bool
	workers  sync.WaitGroup
	verified chan struct{} // closed once no quarantined row remains
	// listed is closed once the startup listing succeeded. Until then every
	// fresh claim and every delete without a row first looks its key up by
	// claim_ref at sandboxd (see maybeUnheld).
	listed chan struct{}
}

// New builds an engine over a loaded store. Every row already in the store
// starts quarantined until a sandboxd listing vouches for it (Run verifies).
func New(cfg Config) (*Engine, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	keys := newRecords(cfg.Store, cfg.Clock, cfg.Tombstones)
	e := &Engine{
		cfg: cfg, log: cfg.Logger, obs: cfg.Observer, id: Identity{Node: cfg.Node, Key: cfg.NodeKey},
		tracer: otel.Tracer(tracerName),
		sbx:    cfg.Sandboxd, store: cfg.Store, rep: cfg.Reporter, owners: cfg.Owners,
		lookups: &lookup{sbx: cfg.Sandboxd},
		keys:    keys, leases: leaseRetries{keys: keys}, seed: maphash.MakeSeed(),
		verified: make(chan struct{}), listed: make(chan struct{}),
	}
	for i := 0; i < cfg.Shards; i++ {
		e.shards = append(e.shards, newShard(i, cfg.QueueDepth, cfg.RequeueMin, cfg.RequeueMax, cfg.Clock))
	}
	if n := e.keys.quarantineAll(); n > 0 {
		e.log.Info("claims loaded from the state file are quarantined until sandboxd vouches for them", "rows", n)
	}
	return e, nil
}

// Run starts the workers, the quarantine verification and the loops that
// Config turns on, and blocks until ctx is done. Then it stops intake,
// waits for in-flight transactions to finish or roll back, and for every
// loop to end. It never releases a VM because of shutdown.
func (e *Engine) Run(ctx context.Context) {
	for _, sh := range e.shards {
		for w := 0; w < e.cfg.Workers; w++ {
			e.workers.Add(1)
			go e.worker(sh)
		}
	}
	// Every loop that reads or writes the store runs here and is joined
	// before Run returns, so that the caller may close the store then.
	var loops sync.WaitGroup
	loops.Go(func() { e.verifyStartup(ctx) })
	if d := e.cfg.LeaseCheckInterval; d > 0 {
		loops.Go(func() { e.watchLeases(ctx, d) })
	}
	if d := e.cfg.ReauthorizeInterval; d > 0 {
		loops.Go(func() { e.reauthorize(ctx, d) })
	}
	if d := e.cfg.OrphanScanInterval; d > 0 {
		loops.Go(func() { e.watchOrphans(ctx, d, e.cfg.OrphanObserver) })
	}
	<-ctx.Done()
	e.shutdown()
	loops.Wait()
}

// shutdown stops intake, lets in-flight transactions complete, and returns
// when every worker has exited. Queued intents that have not started are
// left alone: their Pods stay Pending and are claimed by the next process.
func (e *Engine) shutdown() {
	if e.stopping.Swap(true) {
		e.workers.Wait()
		return
	}
	for _, sh := range e.shards {
		sh.q.ShutDown()
	}
	e.workers.Wait()
}

// Identity is how this engine marks its claims at sandboxd.
func (e *Engine) Identity() Identity { return e.id }

func (e *Engine) shardFor(uid string) *shard {
	return e.shards[maphash.String(e.seed, uid)%uint64(len(e.shards))]
}

// Create records the intent to hold a claim for it.Ref and returns without
// waiting for sandboxd: the outcome reaches the Reporter. It never blocks:
// when the UID's shard is at QueueDepth, the Pod is reported Pending
// (ReasonQueueFull) and its intent is offered again after RequeueMax, as
// long as the Pod generation lives.
func (e *Engine) Create(ctx context.Context, it Intent) error {
	if e.stopping.Load() {
		return ErrStopping
	}
	if replaced := e.keys.born(it.Ref.Key, it.Ref.UID); replaced != "" {
		e.cancelIntent(replaced) // the key moved on to a new Pod generation
	}
	sh := e.shardFor(it.Ref.UID)
	if sh.update(it) {
		return nil
	}
	now := time.Now()
	tctx, root := e.tracer.Start(context.WithoutCancel(ctx), "claim.transaction",
		trace.WithTimestamp(now), trace.WithAttributes(refAttrs(it.Ref)...))
	err := sh.put(&queued{intent: it, ctx: tctx, root: root, received: now, enqueued: now})
	if errors.Is(err, errShardFull) {
		root.SetAttributes(attribute.String("vksandbox.outcome", outcomeDeferred))
		e.pending(tctx, it.Ref, ReasonQueueFull, fmt.Sprintf(
			"%s: the claim queue of this node is full (more Pods than --queue-depth holds per shard); it is offered again in %s",
			it.Ref.Key, e.cfg.RequeueMax))
		root.End()
		time.AfterFunc(e.cfg.RequeueMax, func() { e.offerAgain(it) })
		return nil
	}
	if err != nil {
		root.End()
	}
	return err
}

// offerAgain re-creates a deferred intent, unless its Pod generation was
// deleted or replaced meanwhile, or the engine is stopping.
func (e *Engine) offerAgain(it Intent) {
	if e.stopping.Load() || !e.keys.live(it.Ref.Key, it.Ref.UID) {
		return
	}
	_ = e.Create(context.Background(), it)
}

// Lookup returns the claim of a pod key and its state, without its token.
// O(1), no IO.
func (e *Engine) Lookup(key PodKey) (ClaimView, bool) {
	c, st := e.keys.lookup(key)
	return viewOf(c, st), st != stateNone
}

// Deleted reports whether Pod generation uid was deleted: a delete for it
// came through Delete, and no Create has revived it since. It remembers a
// UID for as long as its tombstone lives (see tombstoneTTL).
func (e *Engine) Deleted(uid string) bool { return e.keys.deleted(uid) }

// Credential returns the sandbox id and token of the durable claim that
// key holds for podUID, for a request sandboxd serves with the sandbox's
// own token (exec, port-forward). False if the key holds no durable claim,
// or holds it for another Pod generation.
func (e *Engine) Credential(key PodKey, podUID string) (id, token string, ok bool) {
	c, st := e.keys.lookup(key)
	if st != StateDurable || c.PodUID != podUID {
		return "", "", false
	}
	return c.ID, c.Token, true
}

// Range visits every durable row, without its token (for startup restore
// and audits).
func (e *Engine) Range(fn func(key PodKey, c ClaimView) bool) {
	e.store.Range(func(key string, c store.Claim) bool { return fn(PodKey(key), viewOf(c, StateDurable)) })
}

// Counts reports held, quarantined and tentative rows.
func (e *Engine) Counts() (held, quarantined, tentative int) { return e.keys.counts() }

// QueueDepths reports the number of UIDs holding an intent, per shard.
func (e *Engine) QueueDepths() []int {
	d := make([]int, len(e.shards))
	for i, sh := range e.shards {
		d[i] = sh.depth()
	}
	return d
}

func (e *Engine) worker(sh *shard) {
	defer e.workers.Done()
	for {
		uid, shutdown := sh.q.Get()
		if shutdown {
			return
		}
		e.process(sh, uid)
		sh.q.Done(uid)
	}
}

// process runs one attempt of the transaction for uid.
func (e *Engine) process(sh *shard, uid string) {
	q, ok := sh.get(uid)
	if !ok {
		// Deleted meanwhile. A retry queued by a transaction that finished
		// after the delete re-created the UID's failure count; forget it,
		// or the rate limiter keeps one entry per such Pod forever.
		sh.q.Forget(uid)
		return
	}
	if e.stopping.Load() {
		return // intake stopped: nothing new starts
	}
	// The wait is a span of its own only in a recorded trace: unrecorded,
	// it would be ids, options and a read of the queue's length per claim
	// that nothing shows. (Its children follow the root's sampling, so no
	// recorded child misses it.)
	if q.root.IsRecording() {
		_, wait := e.tracer.Start(q.ctx, "queue.wait", trace.WithTimestamp(q.enqueued),
			trace.WithAttributes(attribute.Int("vksandbox.shard", sh.id), attribute.Int("vksandbox.queue.depth", sh.q.Len())))
		wait.End()
	}

	// No deduplication here: the workqueue never hands one UID to two
	// workers, and the key lock orders a UID's transactions with its key's
	// other generations.
	rctx, reconcileSpan := e.tracer.Start(q.ctx, "claim.reconcile")
	res := e.reconcile(rctx, q.intent)
	reconcileSpan.End()

	e.obs.ClaimLatency(q.ctx, res.outcome, time.Since(q.received))
	q.root.SetAttributes(attribute.String("vksandbox.outcome", res.outcome))
	if res.err != nil {
		q.root.RecordError(res.err)
		q.root.SetStatus(codes.Error, res.err.Error())
	}
	q.root.End()

	if res.retry {
		sh.renew(uid, func(prev queued) (context.Context, trace.Span) {
			return e.tracer.Start(context.Background(), "claim.transaction",
				trace.WithLinks(trace.LinkFromContext(prev.ctx)),
				trace.WithAttributes(append(refAttrs(prev.intent.Ref), attribute.Bool("vksandbox.retry", true))...))
		})
		sh.q.AddRateLimited(uid)
		return
	}
	sh.finish(uid, q.version)
}

// every runs fn as a pass of loop each interval of Config.Clock until ctx
// ends: the background loops' tick. A pass that outlasts the interval
// delays the next; passes never overlap.
func (e *Engine) every(ctx context.Context, loop string, interval time.Duration, fn func()) {
	t := e.cfg.Clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			e.pass(loop, fn)
		}
	}
}

// pass runs fn and reports its end to Observer.LoopPass, timed on the real
// clock: it is a latency (see Config.Clock).
func (e *Engine) pass(loop string, fn func()) {
	began := time.Now()
	fn()
	e.obs.LoopPass(loop, time.Since(began))
}

// forgetRow drops what memory holds for a key beside its row, once the row
// is deleted: its marks and the lease watch's backoff.
func (e *Engine) forgetRow(key PodKey) { e.keys.forget(key) }

// cancelIntent drops the queued intent of a UID being deleted.
func (e *Engine) cancelIntent(uid string) { e.shardFor(uid).cancel(uid) }

func refAttrs(r PodRef) []attribute.KeyValue {
	ns, name, _ := r.Key.Split()
	return []attribute.KeyValue{
		attribute.String("k8s.namespace.name", ns),
		attribute.String("k8s.pod.name", name),
		attribute.String("k8s.pod.uid", r.UID),
	}
}

// keyErr names the Pod and the cause, never a token.
func keyErr(key PodKey, what string, err error) error {
	return fmt.Errorf("%s for %s: %w", what, key, err)
}
